/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent-run.h"
#include "leave-out.h"
#include "review-settings.h"
#include "string-util.h"

int agent_leave_out(AgentRun *run, LedgerLeaveOut *ret) {
        const Config *c = &run->factory->config;
        const TaskProgress *p = &run->task->progress;
        LedgerLeaveOut o = { .binaries = c->leave_out_binaries };

        if (config_leave_out(c, &o.patterns) < 0)
                goto oom;
        for (char **i = p->written; i && *i; i++)
                if (strv_extend(&o.written, *i) < 0)
                        goto oom;
        for (char **i = p->kept; i && *i; i++)
                if (strv_extend(&o.kept, *i) < 0)
                        goto oom;
        if (p->keep_pending && strv_extend(&o.kept, p->keep_pending) < 0)
                goto oom;
        if (p->n_test_windows > 0) {
                o.windows = calloc(p->n_test_windows, 2 * sizeof(uint64_t));
                if (!o.windows)
                        goto oom;
                memcpy(o.windows, p->test_windows, p->n_test_windows * 2 * sizeof(uint64_t));
                o.n_windows = p->n_test_windows;
        }
        *ret = o;
        return 0;
oom:
        ledger_leave_out_done(&o);
        return -ENOMEM;
}

/* SECURITY: the base's .agentfab.md, never the task's: what the agent
 * wrote cannot decide what is left out of its own change. */
int leave_out_apply(Ledger *l, LedgerLeaveOut *o) {
        _cleanup_(review_repo_settings_done) ReviewRepoSettings s = {};
        _cleanup_free_ char *text = NULL;
        size_t size = 0;
        int r;

        r = ledger_read_file(l, false, ".agentfab.md", REVIEW_SETTINGS_SIZE_MAX, &text, &size);
        if (r >= 0 && text && review_repo_settings_parse(text, size, &s) >= 0)
                for (char **i = s.leave_out; i && *i; i++)
                        if (strv_extend(&o->patterns, *i) < 0)
                                return -ENOMEM;
        return ledger_set_leave_out(l, o);
}
