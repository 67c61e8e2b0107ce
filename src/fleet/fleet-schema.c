/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "fleet-db-internal.h"
#include "fleet-db.h"
#include "macro.h"

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

/* The schema "agentfab" and its migrations. The SQL lives here as string
 * constants, so that the daemon carries the schema it needs and migrates
 * the database itself.
 *
 * SECURITY: host roles get no right on any table. Each host logs in with
 * its own role; hosts.role maps it to its host name; every function a host
 * calls is SECURITY DEFINER (it runs as the schema's owner), with a fixed
 * search_path, and finds the caller's host by session_user, never from an
 * argument. So a host can write only its own liveness row, ack only tasks
 * it holds at their current epoch, read back only the conversations of the
 * tasks it holds, and enqueue only for owners "user@<its own name>".
 * add_host(), which maps roles to hosts, is for the owner alone.
 *
 * SQLSTATEs the functions raise (fleet_db_result_errno() maps them):
 * 42501 the caller is no host of the fleet; 22023 a bad argument; P0002 no
 * such task; AF001 the caller's lease ran out; AF002 the task has ended. */

/* The advisory lock every migrating connection takes first: two hosts that
 * migrate at once apply each migration once. ("agentfab" read as a
 * number; any constant that other users of the database do not take.) */
#define FLEET_SCHEMA_LOCK "7019850001"

static const char migration_1[] =
        "CREATE TABLE agentfab.hosts (\n"
        "        name text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$'),\n"
        "        role name NOT NULL UNIQUE,\n"
        "        environments text[] NOT NULL DEFAULT '{}',\n"
        "        lease_until timestamptz,\n"
        "        renewed timestamptz);\n"
        "CREATE TABLE agentfab.tasks (\n"
        "        id text PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 255),\n"
        "        owner text NOT NULL CHECK (length(owner) <= 512),\n"
        "        spec jsonb NOT NULL CHECK (octet_length(spec::text) <= " STRINGIFY(FLEET_DB_SPEC_MAX) "),\n"
        "        environment text CHECK (length(environment) BETWEEN 1 AND 255),\n"
        "        state text NOT NULL DEFAULT 'queued'\n"
        "                CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),\n"
        "        host text REFERENCES agentfab.hosts (name),\n"
        "        epoch bigint NOT NULL DEFAULT 0,\n"
        "        progress jsonb CHECK (octet_length(progress::text) <= " STRINGIFY(FLEET_DB_PROGRESS_MAX) "),\n"
        "        checkpoint text CHECK (length(checkpoint) <= 128),\n"
        "        created timestamptz NOT NULL DEFAULT now(),\n"
        "        updated timestamptz NOT NULL DEFAULT now());\n"
        "CREATE INDEX tasks_queued ON agentfab.tasks (created, id) WHERE state = 'queued';\n"
        "CREATE INDEX tasks_running ON agentfab.tasks (host) WHERE state = 'running';\n"
        "CREATE TABLE agentfab.lines (\n"
        "        task text NOT NULL REFERENCES agentfab.tasks (id) ON DELETE CASCADE,\n"
        "        n bigint NOT NULL CHECK (n >= 0),\n"
        "        epoch bigint NOT NULL,\n"
        "        line text NOT NULL CHECK (octet_length(line) <= " STRINGIFY(FLEET_DB_LINE_MAX) "),\n"
        "        PRIMARY KEY (task, n));\n"
        "CREATE TABLE agentfab.requests (\n"
        "        id bigserial PRIMARY KEY,\n"
        "        task text NOT NULL REFERENCES agentfab.tasks (id) ON DELETE CASCADE,\n"
        "        kind text NOT NULL CHECK (kind IN ('approve', 'reject', 'cancel', 'pause', 'resume', 'amend')),\n"
        "        argument text CHECK (length(argument) <= 65536),\n"
        "        stop bigint NOT NULL DEFAULT 0,\n"
        "        from_host text NOT NULL REFERENCES agentfab.hosts (name),\n"
        "        created timestamptz NOT NULL DEFAULT now(),\n"
        "        taken timestamptz,\n"
        "        done timestamptz);\n"
        "CREATE INDEX requests_waiting ON agentfab.requests (task) WHERE done IS NULL;\n"
        "REVOKE ALL ON agentfab.hosts, agentfab.tasks, agentfab.lines, agentfab.requests FROM PUBLIC;\n"
        "\n"
        /* Who calls: the host mapped to the login role. */
        "CREATE FUNCTION agentfab.caller_host() RETURNS text\n"
        "LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = agentfab, pg_temp AS $f$\n"
        "DECLARE h text;\n"
        "BEGIN\n"
        "        SELECT name INTO h FROM hosts WHERE role = session_user;\n"
        "        IF h IS NULL THEN\n"
        "                RAISE EXCEPTION 'Role \"%\" is no host of the fleet.', session_user USING ERRCODE = '42501';\n"
        "        END IF;\n"
        "        RETURN h;\n"
        "END $f$;\n"
        /* ... and whose lease still runs: only such a host takes tasks. */
        "CREATE FUNCTION agentfab.caller_live_host() RETURNS text\n"
        "LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = agentfab, pg_temp AS $f$\n"
        "DECLARE h text := caller_host();\n"
        "BEGIN\n"
        "        IF NOT EXISTS (SELECT 1 FROM hosts WHERE name = h AND lease_until > now()) THEN\n"
        "                RAISE EXCEPTION 'The lease of host \"%\" has run out.', h USING ERRCODE = 'AF001';\n"
        "        END IF;\n"
        "        RETURN h;\n"
        "END $f$;\n"
        "\n"
        "CREATE FUNCTION agentfab.add_host(p_name text, p_role name) RETURNS void\n"
        "LANGUAGE plpgsql SECURITY DEFINER SET search_path = agentfab, pg_temp AS $f$\n"
        "BEGIN\n"
        "        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = p_role) THEN\n"
        "                RAISE EXCEPTION 'No role \"%\".', p_role USING ERRCODE = '22023';\n"
        "        END IF;\n"
        "        INSERT INTO hosts (name, role) VALUES (p_name, p_role) ON CONFLICT (name) DO NOTHING;\n"
        "        IF NOT EXISTS (SELECT 1 FROM hosts WHERE name = p_name AND role = p_role) THEN\n"
        "                RAISE EXCEPTION 'Host \"%\" has another role.', p_name USING ERRCODE = '23505';\n"
        "        END IF;\n"
        "END $f$;\n"
        "REVOKE ALL ON FUNCTION agentfab.add_host(text, name) FROM PUBLIC;\n"
        "\n"
        "CREATE FUNCTION agentfab.renew(p_lease_usec bigint, p_environments jsonb) RETURNS bigint\n"
        "LANGUAGE plpgsql SECURITY DEFINER SET search_path = agentfab, pg_temp AS $f$\n"
        "DECLARE h text := caller_host(); u timestamptz;\n"
        "BEGIN\n"
        "        IF p_lease_usec IS NULL OR p_lease_usec < 1000000 OR p_lease_usec > 86400000000 THEN\n"
        "                RAISE EXCEPTION 'Lease out of range.' USING ERRCODE = '22023';\n"
        "        END IF;\n"
        "        UPDATE hosts SET lease_until = now() + p_lease_usec * interval '1 microsecond', renewed = now(),\n"
        "                environments = coalesce((SELECT array_agg(e) FROM jsonb_array_elements_text(\n"
        "                        coalesce(p_environments, '[]')) e), '{}')\n"
        "                WHERE name = h RETURNING lease_until INTO u;\n"
        "        RETURN (extract(epoch FROM u) * 1000000)::bigint;\n"
        "END $f$;\n"
        "\n"
        "CREATE FUNCTION agentfab.enqueue(p_id text, p_owner text, p_spec jsonb, p_environment text) RETURNS void\n"
        "LANGUAGE plpgsql SECURITY DEFINER SET search_path = agentfab, pg_temp AS $f$\n"
        "DECLARE h text := caller_host();\n"
        "BEGIN\n"
        "        IF p_owner IS NULL OR split_part(p_owner, '@', 1) !~ '^[^@[:space:][:cntrl:]]{1,64}$'\n"
        "           OR p_owner <> split_part(p_owner, '@', 1) || '@' || h THEN\n"
        "                RAISE EXCEPTION 'Owner \"%\" is not \"user@%\".', p_owner, h USING ERRCODE = '22023';\n"
        "        END IF;\n"
        "        IF p_id IS NULL OR p_id !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$' THEN\n"
        "                RAISE EXCEPTION 'Bad task id.' USING ERRCODE = '22023';\n"
        "        END IF;\n"
        "        INSERT INTO tasks (id, owner, spec, environment) VALUES (p_id, p_owner, p_spec, p_environment);\n"
        "        PERFORM pg_notify('" FLEET_DB_CHANNEL_QUEUE "', p_id);\n"
        "END $f$;\n"
        "\n"
        /* SKIP LOCKED: a row another claimer holds is passed over, not
         * waited for, so concurrent claimers take disjoint tasks. */
        "CREATE FUNCTION agentfab.claim(p_max integer)\n"
        "RETURNS TABLE (id text, owner text, spec text, environment text, epoch bigint, checkpoint text)\n"
        "LANGUAGE plpgsql SECURITY DEFINER SET search_path = agentfab, pg_temp AS $f$\n"
        "#variable_conflict use_column\n"
        "DECLARE h text := caller_live_host(); envs text[];\n"
        "BEGIN\n"
        "        IF p_max IS NULL OR p_max < 1 OR p_max > 1024 THEN\n"
        "                RAISE EXCEPTION 'Claim count out of range.' USING ERRCODE = '22023';\n"
        "        END IF;\n"
        "        SELECT hosts.environments INTO envs FROM hosts WHERE name = h;\n"
        "        RETURN QUERY\n"
        "        WITH c AS (SELECT t.id FROM tasks t\n"
        "                   WHERE t.state = 'queued' AND (t.environment IS NULL OR t.environment = ANY (envs))\n"
        "                   ORDER BY t.created, t.id LIMIT p_max FOR UPDATE SKIP LOCKED)\n"
        "        UPDATE tasks t SET state = 'running', host = h, epoch = t.epoch + 1, updated = now()\n"
        "                FROM c WHERE t.id = c.id\n"
        "                RETURNING t.id, t.owner, t.spec::text, t.environment, t.epoch, t.checkpoint;\n"
        "END $f$;\n"
        "\n"
        /* A running task whose host's lease ran out, taken over with the
         * epoch raised: the old host's acks no longer match. */
        "CREATE FUNCTION agentfab.reap(p_max integer)\n"
        "RETURNS TABLE (id text, owner text, spec text, environment text, epoch bigint, checkpoint text)\n"
        "LANGUAGE plpgsql SECURITY DEFINER SET search_path = agentfab, pg_temp AS $f$\n"
        "#variable_conflict use_column\n"
        "DECLARE h text := caller_live_host(); envs text[];\n"
        "BEGIN\n"
        "        IF p_max IS NULL OR p_max < 1 OR p_max > 1024 THEN\n"
        "                RAISE EXCEPTION 'Reap count out of range.' USING ERRCODE = '22023';\n"
        "        END IF;\n"
        "        SELECT hosts.environments INTO envs FROM hosts WHERE name = h;\n"
        "        RETURN QUERY\n"
        "        WITH c AS (SELECT t.id FROM tasks t JOIN hosts o ON o.name = t.host\n"
        "                   WHERE t.state = 'running' AND (o.lease_until IS NULL OR o.lease_until <= now())\n"
        "                     AND (t.environment IS NULL OR t.environment = ANY (envs))\n"
        "                   ORDER BY t.updated, t.id LIMIT p_max FOR UPDATE OF t SKIP LOCKED)\n"
        "        UPDATE tasks t SET host = h, epoch = t.epoch + 1, updated = now()\n"
        "                FROM c WHERE t.id = c.id\n"
        "                RETURNING t.id, t.owner, t.spec::text, t.environment, t.epoch, t.checkpoint;\n"
        "END $f$;\n"
        "\n"
        /* The UPDATE locks the task's row and, in READ COMMITTED, checks
         * its WHERE again against a reap that committed meanwhile: an ack
         * and a takeover never both win. Lines are numbered by the caller,
         * so an ack retried after a lost connection rewrites its own lines
         * instead of adding them twice. */
        "CREATE FUNCTION agentfab.ack(p_id text, p_epoch bigint, p_first bigint, p_lines jsonb,\n"
        "                             p_progress jsonb, p_checkpoint text) RETURNS boolean\n"
        "LANGUAGE plpgsql SECURITY DEFINER SET search_path = agentfab, pg_temp AS $f$\n"
        "DECLARE h text := caller_host(); next_n bigint;\n"
        "BEGIN\n"
        "        UPDATE tasks t SET progress = coalesce(p_progress, t.progress),\n"
        "                           checkpoint = coalesce(p_checkpoint, t.checkpoint), updated = now()\n"
        "                WHERE t.id = p_id AND t.epoch = p_epoch AND t.host = h AND t.state = 'running';\n"
        "        IF NOT FOUND THEN\n"
        "                RETURN false;\n"
        "        END IF;\n"
        "        SELECT coalesce(max(n) + 1, 0) INTO next_n FROM lines WHERE task = p_id;\n"
        "        IF jsonb_array_length(coalesce(p_lines, '[]')) > " STRINGIFY(FLEET_DB_ACK_LINES_MAX) " THEN\n"
        "                RAISE EXCEPTION 'Too many lines in one ack.' USING ERRCODE = '22023';\n"
        "        END IF;\n"
        "        IF p_first IS NULL OR p_first < 0 OR p_first > next_n THEN\n"
        "                RAISE EXCEPTION 'Line % would leave a gap after line %.', p_first, next_n - 1\n"
        "                        USING ERRCODE = '22023';\n"
        "        END IF;\n"
        "        INSERT INTO lines (task, n, epoch, line)\n"
        "                SELECT p_id, p_first + e.ord - 1, p_epoch, e.value\n"
        "                FROM jsonb_array_elements_text(coalesce(p_lines, '[]')) WITH ORDINALITY AS e (value, ord)\n"
        "                ON CONFLICT (task, n) DO UPDATE SET line = excluded.line, epoch = excluded.epoch;\n"
        "        RETURN true;\n"
        "END $f$;\n"
        "\n"
        "CREATE FUNCTION agentfab.finish(p_id text, p_epoch bigint, p_state text) RETURNS boolean\n"
        "LANGUAGE plpgsql SECURITY DEFINER SET search_path = agentfab, pg_temp AS $f$\n"
        "DECLARE h text := caller_host();\n"
        "BEGIN\n"
        "        IF p_state IS NULL OR p_state NOT IN ('succeeded', 'failed', 'cancelled') THEN\n"
        "                RAISE EXCEPTION 'Bad final state.' USING ERRCODE = '22023';\n"
        "        END IF;\n"
        "        UPDATE tasks t SET state = p_state, updated = now()\n"
        "                WHERE t.id = p_id AND t.epoch = p_epoch AND t.host = h AND t.state = 'running';\n"
        "        IF FOUND THEN\n"
        "                RETURN true;\n"
        "        END IF;\n"
        /* A finish repeated after a lost connection finds its own work. */
        "        RETURN EXISTS (SELECT 1 FROM tasks t WHERE t.id = p_id AND t.epoch = p_epoch AND t.host = h\n"
        "                                                AND t.state = p_state);\n"
        "END $f$;\n"
        "\n"
        /* What the caller holds: after a claim or reap whose answer was
         * lost with the connection, the tasks it took are found here. */
        "CREATE FUNCTION agentfab.held()\n"
        "RETURNS TABLE (id text, owner text, spec text, environment text, epoch bigint, checkpoint text)\n"
        "LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = agentfab, pg_temp AS $f$\n"
        "#variable_conflict use_column\n"
        "DECLARE h text := caller_host();\n"
        "BEGIN\n"
        "        RETURN QUERY SELECT t.id, t.owner, t.spec::text, t.environment, t.epoch, t.checkpoint\n"
        "                FROM tasks t WHERE t.host = h AND t.state = 'running' ORDER BY t.id;\n"
        "END $f$;\n"
        "\n"
        "CREATE FUNCTION agentfab.list_tasks(p_limit integer)\n"
        "RETURNS TABLE (id text, state text, host text, epoch bigint, owner text, updated bigint)\n"
        "LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = agentfab, pg_temp AS $f$\n"
        "#variable_conflict use_column\n"
        "BEGIN\n"
        "        PERFORM caller_host();\n"
        "        RETURN QUERY SELECT t.id, t.state, t.host, t.epoch, t.owner,\n"
        "                (extract(epoch FROM t.updated) * 1000000)::bigint\n"
        "                FROM tasks t ORDER BY t.created DESC, t.id\n"
        "                LIMIT CASE WHEN p_limit > 0 THEN p_limit END;\n"
        "END $f$;\n"
        "\n"
        "CREATE FUNCTION agentfab.post_request(p_task text, p_kind text, p_argument text, p_stop bigint)\n"
        "RETURNS bigint\n"
        "LANGUAGE plpgsql SECURITY DEFINER SET search_path = agentfab, pg_temp AS $f$\n"
        "DECLARE h text := caller_host(); t tasks%ROWTYPE; rid bigint;\n"
        "BEGIN\n"
        "        IF p_kind IN ('approve', 'reject') AND (p_stop IS NULL OR p_stop < 1)\n"
        "           OR p_kind NOT IN ('approve', 'reject') AND p_stop <> 0 THEN\n"
        "                RAISE EXCEPTION 'An approve or reject names its stop; nothing else does.' USING ERRCODE = '22023';\n"
        "        END IF;\n"
        "        SELECT * INTO t FROM tasks WHERE tasks.id = p_task FOR UPDATE;\n"
        "        IF NOT FOUND THEN\n"
        "                RAISE EXCEPTION 'No task \"%\".', p_task USING ERRCODE = 'P0002';\n"
        "        END IF;\n"
        "        IF t.state NOT IN ('queued', 'running') THEN\n"
        "                RAISE EXCEPTION 'Task \"%\" is %.', p_task, t.state USING ERRCODE = 'AF002';\n"
        "        END IF;\n"
        "        INSERT INTO requests (task, kind, argument, stop, from_host)\n"
        "                VALUES (p_task, p_kind, p_argument, coalesce(p_stop, 0), h) RETURNING requests.id INTO rid;\n"
        /* Nobody holds a queued task: its cancel is done here and now. */
        "        IF t.state = 'queued' AND p_kind = 'cancel' THEN\n"
        "                UPDATE tasks SET state = 'cancelled', updated = now() WHERE tasks.id = p_task;\n"
        "                UPDATE requests SET taken = now(), done = now() WHERE requests.id = rid;\n"
        "        ELSIF t.host IS NOT NULL THEN\n"
        "                PERFORM pg_notify('" FLEET_DB_CHANNEL_REQUESTS "', t.host);\n"
        "        END IF;\n"
        "        RETURN rid;\n"
        "END $f$;\n"
        "\n"
        "CREATE FUNCTION agentfab.take_requests()\n"
        "RETURNS TABLE (id bigint, task text, kind text, argument text, stop bigint, from_host text, epoch bigint)\n"
        "LANGUAGE plpgsql SECURITY DEFINER SET search_path = agentfab, pg_temp AS $f$\n"
        "#variable_conflict use_column\n"
        "DECLARE h text := caller_host();\n"
        "BEGIN\n"
        "        RETURN QUERY\n"
        "        WITH u AS (UPDATE requests r SET taken = coalesce(r.taken, now()) FROM tasks t\n"
        "                   WHERE r.task = t.id AND t.host = h AND t.state = 'running' AND r.done IS NULL\n"
        "                   RETURNING r.id, r.task, r.kind, r.argument, r.stop, r.from_host, t.epoch)\n"
        "        SELECT * FROM u ORDER BY u.id;\n"
        "END $f$;\n"
        "\n"
        /* Done only by the task's holder; done again, still true, so that
         * it can be repeated after a lost answer. */
        "CREATE FUNCTION agentfab.request_done(p_id bigint) RETURNS boolean\n"
        "LANGUAGE plpgsql SECURITY DEFINER SET search_path = agentfab, pg_temp AS $f$\n"
        "DECLARE h text := caller_host();\n"
        "BEGIN\n"
        "        UPDATE requests r SET done = coalesce(r.done, now()) FROM tasks t\n"
        "                WHERE r.id = p_id AND r.task = t.id AND t.host = h;\n"
        "        RETURN FOUND;\n"
        "END $f$;\n"
        "\n"
        "CREATE FUNCTION agentfab.read_task(p_id text)\n"
        "RETURNS TABLE (epoch bigint, progress text, checkpoint text, lines text)\n"
        "LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = agentfab, pg_temp AS $f$\n"
        "#variable_conflict use_column\n"
        "DECLARE h text := caller_host();\n"
        "BEGIN\n"
        "        RETURN QUERY SELECT t.epoch, t.progress::text, t.checkpoint,\n"
        "                coalesce((SELECT jsonb_agg(l.line ORDER BY l.n) FROM lines l WHERE l.task = t.id), '[]')::text\n"
        "                FROM tasks t WHERE t.id = p_id AND t.host = h AND t.state = 'running';\n"
        "        IF NOT FOUND THEN\n"
        "                RAISE EXCEPTION 'Host \"%\" holds no task \"%\".', h, p_id USING ERRCODE = 'P0002';\n"
        "        END IF;\n"
        "END $f$;\n";

/* What people ask for on any host about a task held on another: its
 * summary and the tail of its output log, written by the holder under its
 * epoch, read by any host of the fleet (polkit on the reader's host
 * decides who sees them there). */
static const char migration_2[] =
        "CREATE TABLE agentfab.outputs (\n"
        "        task text NOT NULL REFERENCES agentfab.tasks (id) ON DELETE CASCADE,\n"
        "        name text NOT NULL CHECK (name IN ('summary', 'log')),\n"
        "        epoch bigint NOT NULL,\n"
        "        content text NOT NULL CHECK (octet_length(content) <= " STRINGIFY(FLEET_DB_OUTPUT_MAX) "),\n"
        "        updated timestamptz NOT NULL DEFAULT now(),\n"
        "        PRIMARY KEY (task, name));\n"
        "REVOKE ALL ON agentfab.outputs FROM PUBLIC;\n"
        "\n"
        /* The holder at its epoch, also once it has ended the task (the
         * summary is written last). */
        "CREATE FUNCTION agentfab.put_output(p_task text, p_epoch bigint, p_name text, p_content text)\n"
        "RETURNS boolean\n"
        "LANGUAGE plpgsql SECURITY DEFINER SET search_path = agentfab, pg_temp AS $f$\n"
        "DECLARE h text := caller_host();\n"
        "BEGIN\n"
        "        PERFORM 1 FROM tasks t WHERE t.id = p_task AND t.epoch = p_epoch AND t.host = h FOR SHARE;\n"
        "        IF NOT FOUND THEN\n"
        "                RETURN false;\n"
        "        END IF;\n"
        "        INSERT INTO outputs (task, name, epoch, content) VALUES (p_task, p_name, p_epoch, p_content)\n"
        "                ON CONFLICT (task, name) DO UPDATE\n"
        "                SET epoch = excluded.epoch, content = excluded.content, updated = now();\n"
        "        RETURN true;\n"
        "END $f$;\n"
        "\n"
        /* A host that stops gives its tasks back at once instead of
         * letting its lease run out; the next claim raises the epoch. */
        "CREATE FUNCTION agentfab.release(p_id text, p_epoch bigint) RETURNS boolean\n"
        "LANGUAGE plpgsql SECURITY DEFINER SET search_path = agentfab, pg_temp AS $f$\n"
        "DECLARE h text := caller_host();\n"
        "BEGIN\n"
        "        UPDATE tasks t SET state = 'queued', host = NULL, updated = now()\n"
        "                WHERE t.id = p_id AND t.epoch = p_epoch AND t.host = h AND t.state = 'running';\n"
        "        IF FOUND THEN\n"
        "                PERFORM pg_notify('" FLEET_DB_CHANNEL_QUEUE "', p_id);\n"
        "        END IF;\n"
        "        RETURN FOUND;\n"
        "END $f$;\n"
        "\n"
        "CREATE FUNCTION agentfab.get_output(p_task text, p_name text)\n"
        "RETURNS TABLE (epoch bigint, content text)\n"
        "LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = agentfab, pg_temp AS $f$\n"
        "#variable_conflict use_column\n"
        "BEGIN\n"
        "        PERFORM caller_host();\n"
        "        RETURN QUERY SELECT o.epoch, o.content FROM outputs o WHERE o.task = p_task AND o.name = p_name;\n"
        "        IF NOT FOUND THEN\n"
        "                RAISE EXCEPTION 'No % of task \"%\".', p_name, p_task USING ERRCODE = 'P0002';\n"
        "        END IF;\n"
        "END $f$;\n";

/* People on any host: what status shows of a task, written by its holder
 * under its epoch as one more output, and one task read by id (its row and
 * that status together), so that a host asked about a task it does not
 * hold reads one row, not the fleet's list. The constraint is replaced by
 * name (DROP ... IF EXISTS), so that the migration applies to a schema
 * made by any earlier version. */
static const char migration_3[] =
        "ALTER TABLE agentfab.outputs DROP CONSTRAINT IF EXISTS outputs_name_check;\n"
        "ALTER TABLE agentfab.outputs ADD CONSTRAINT outputs_name_check\n"
        "        CHECK (name IN ('summary', 'log', 'status'));\n"
        "\n"
        "CREATE OR REPLACE FUNCTION agentfab.get_task(p_id text)\n"
        "RETURNS TABLE (id text, state text, host text, epoch bigint, owner text, updated bigint, status text)\n"
        "LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = agentfab, pg_temp AS $f$\n"
        "#variable_conflict use_column\n"
        "BEGIN\n"
        "        PERFORM caller_host();\n"
        "        RETURN QUERY SELECT t.id, t.state, t.host, t.epoch, t.owner,\n"
        "                (extract(epoch FROM t.updated) * 1000000)::bigint,\n"
        "                (SELECT o.content FROM outputs o WHERE o.task = t.id AND o.name = 'status')\n"
        "                FROM tasks t WHERE t.id = p_id;\n"
        "        IF NOT FOUND THEN\n"
        "                RAISE EXCEPTION 'No task \"%\".', p_id USING ERRCODE = 'P0002';\n"
        "        END IF;\n"
        "END $f$;\n";

const char *const fleet_schema_migrations[FLEET_DB_SCHEMA_VERSION] = {
        migration_1,
        migration_2,
        migration_3,
};

/* A migration: version-check without a lock (a current schema costs one
 * round trip and no right beyond USAGE), then per missing version one
 * transaction: the advisory lock, the version read again under it, the
 * migration's SQL and its row in agentfab.migrations, COMMIT. */

typedef struct Migration {
        int version;    /* read under the lock */
} Migration;

static const char migrate_peek[] =
        "SELECT CASE WHEN to_regclass('agentfab.migrations') IS NULL THEN 0 END";
static const char migrate_version[] =
        "SELECT coalesce(max(version), 0) FROM agentfab.migrations";
static const char migrate_begin[] =
        "BEGIN;\n"
        "SELECT pg_advisory_xact_lock(" FLEET_SCHEMA_LOCK ");\n"
        "CREATE SCHEMA IF NOT EXISTS agentfab;\n"
        "CREATE TABLE IF NOT EXISTS agentfab.migrations (\n"
        "        version integer PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now());\n"
        "GRANT USAGE ON SCHEMA agentfab TO PUBLIC;\n"
        "GRANT SELECT ON agentfab.migrations TO PUBLIC;\n"
        "SELECT coalesce(max(version), 0) FROM agentfab.migrations;";

static void migrate_fail(FleetDb *db, FleetDbQuery *q, int error, const char *message) {
        fleet_db_done_t done = q->handler;

        if (done)
                done(db, error, message, q->userdata);
}

static void migrate_succeed(FleetDb *db, FleetDbQuery *q) {
        fleet_db_done_t done = q->handler;

        if (done)
                done(db, 0, NULL, q->userdata);
}

static int read_version(PGresult *res, int *ret) {
        char *end;
        long v;

        if (!res || PQntuples(res) != 1 || PQnfields(res) != 1 || PQgetisnull(res, 0, 0))
                return -EBADMSG;
        errno = 0;
        v = strtol(PQgetvalue(res, 0, 0), &end, 10);
        if (errno != 0 || *end != '\0' || v < 0 || v > INT32_MAX)
                return -EBADMSG;
        *ret = (int) v;
        return 0;
}

static void migrate_locked(FleetDb *db, FleetDbQuery *q, PGresult *res, int error, const char *error_message);

/* The migration and its row, then COMMIT, then the next round. */
static void migrate_applied(FleetDb *db, FleetDbQuery *q, PGresult *res, int error, const char *error_message) {
        int r;

        if (error < 0)
                return migrate_fail(db, q, error, error_message);

        r = fleet_db_query_first(db, migrate_begin, true, NULL, 0, migrate_locked, q->handler, q->userdata,
                                 NULL, NULL);
        if (r < 0)
                migrate_fail(db, q, r, "Out of memory");
}

static void migrate_locked(FleetDb *db, FleetDbQuery *q, PGresult *res, int error, const char *error_message) {
        _cleanup_free_ char *sql = NULL;
        int version, r;

        if (error < 0)
                return migrate_fail(db, q, error, error_message);

        r = read_version(res, &version);
        if (r < 0 || version > FLEET_DB_SCHEMA_VERSION) {
                (void) fleet_db_query_first(db, "ROLLBACK", true, NULL, 0, NULL, NULL, NULL, NULL, NULL);
                return migrate_fail(db, q, r < 0 ? r : -EPROTONOSUPPORT,
                                    r < 0 ? "Unreadable schema version"
                                          : "The fleet's schema is newer than this agentfab knows");
        }
        if (version == FLEET_DB_SCHEMA_VERSION) {
                /* Another host migrated meanwhile, or nothing is left. */
                r = fleet_db_query_first(db, "COMMIT", true, NULL, 0, NULL, NULL, NULL, NULL, NULL);
                if (r < 0)
                        return migrate_fail(db, q, r, "Out of memory");
                return migrate_succeed(db, q);
        }

        if (asprintf(&sql, "%s\nINSERT INTO agentfab.migrations (version) VALUES (%i);\nCOMMIT;",
                     fleet_schema_migrations[version], version + 1) < 0)
                return migrate_fail(db, q, -ENOMEM, "Out of memory");
        r = fleet_db_query_first(db, sql, true, NULL, 0, migrate_applied, q->handler, q->userdata, sql, free);
        TAKE_PTR(sql);
        if (r < 0)
                return migrate_fail(db, q, r, "Out of memory");
}

static void migrate_peeked_version(FleetDb *db, FleetDbQuery *q, PGresult *res, int error,
                                   const char *error_message) {
        int version = 0, r;

        if (error < 0)
                return migrate_fail(db, q, error, error_message);
        r = read_version(res, &version);
        if (r < 0)
                return migrate_fail(db, q, r, "Unreadable schema version");
        if (version > FLEET_DB_SCHEMA_VERSION)
                return migrate_fail(db, q, -EPROTONOSUPPORT, "The fleet's schema is newer than this agentfab knows");
        if (version == FLEET_DB_SCHEMA_VERSION)
                return migrate_succeed(db, q);

        r = fleet_db_query_first(db, migrate_begin, true, NULL, 0, migrate_locked, q->handler, q->userdata, NULL,
                                 NULL);
        if (r < 0)
                migrate_fail(db, q, r, "Out of memory");
}

static void migrate_peeked(FleetDb *db, FleetDbQuery *q, PGresult *res, int error, const char *error_message) {
        int r;

        if (error < 0)
                return migrate_fail(db, q, error, error_message);
        if (!res || PQntuples(res) != 1)
                return migrate_fail(db, q, -EBADMSG, "Unexpected answer");

        if (PQgetisnull(res, 0, 0))
                /* The version table exists: read it. */
                r = fleet_db_query_first(db, migrate_version, false, NULL, 0, migrate_peeked_version, q->handler,
                                         q->userdata, NULL, NULL);
        else
                r = fleet_db_query_first(db, migrate_begin, true, NULL, 0, migrate_locked, q->handler,
                                         q->userdata, NULL, NULL);
        if (r < 0)
                migrate_fail(db, q, r, "Out of memory");
}

int fleet_db_migrate(FleetDb *db, fleet_db_done_t done, void *userdata) {
        assert(db);

        return fleet_db_query(db, migrate_peek, NULL, 0, migrate_peeked, done, userdata, NULL, NULL);
}
