/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/epoll.h>
#include <time.h>

#include "curl-util.h"
#include "json-util.h"
#include "log.h"
#include "model-client.h"
#include "model-text-calls.h"
#include "string-util.h"

/* How libcurl's multi interface is driven by sd-event:
 *
 * libcurl tells us, through CURLMOPT_SOCKETFUNCTION, which sockets it wants
 * watched for what; each gets an sd-event I/O source, kept as the socket's
 * "socketp" with curl_multi_assign(). Through CURLMOPT_TIMERFUNCTION it asks
 * for one timeout, which is one sd-event timer. When a source fires we hand
 * the event to curl_multi_socket_action() and then collect finished
 * transfers with curl_multi_info_read(). Handlers run only from there, never
 * from inside a libcurl callback, so a handler may start or cancel calls.
 *
 * Retries do not keep the transfer in the multi handle: the easy handle is
 * removed, a timer of our own waits the backoff, and the handle is added
 * again. */

typedef struct ReplayCursor {
        char *path;
        ModelReplay *replay;
        struct ReplayCursor *next;
} ReplayCursor;

struct ModelClient {
        sd_event *event;
        CURLM *multi;
        sd_event_source *timer;
        ModelCall *calls;
        ReplayCursor *cursors;
        bool curl_initialized;
};

struct ModelCall {
        ModelClient *client;
        ModelCall *prev, *next;

        model_reply_handler_t handler;
        void *userdata;

        /* HTTP */
        CURL *easy;
        struct curl_slist *headers;
        char *url;
        char *body;
        json_object *request;
        char *api_key;                  /* only to scrub it from error messages */
        bool in_multi;
        bool stream;
        unsigned attempts, max_retries;
        uint64_t retry_base_usec, max_reply_bytes, timeout_usec;
        sd_event_source *retry_timer;

        /* The current attempt */
        char *buf;
        size_t size, allocated;
        bool too_big;
        int64_t retry_after_sec;        /* -1: none */

        /* Replay */
        ModelReplay *replay;
        sd_event_source *defer;

        bool in_handler;
};

static void wipe_headers(struct curl_slist *l) {
        for (struct curl_slist *i = l; i; i = i->next)
                if (i->data)
                        explicit_bzero(i->data, strlen(i->data));
        curl_slist_free_all(l);
}

static ModelCall *model_call_free(ModelCall *call) {
        if (!call)
                return NULL;

        if (call->client) {
                if (call->prev)
                        call->prev->next = call->next;
                else
                        call->client->calls = call->next;
                if (call->next)
                        call->next->prev = call->prev;
        }
        if (call->easy) {
                if (call->in_multi)
                        (void) curl_multi_remove_handle(call->client->multi, call->easy);
                curl_easy_cleanup(call->easy);
        }
        wipe_headers(call->headers);
        model_api_key_free(call->api_key);
        sd_event_source_disable_unref(call->retry_timer);
        sd_event_source_disable_unref(call->defer);
        free(call->url);
        free(call->body);
        json_object_put(call->request);
        free(call->buf);
        free(call);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(ModelCall *, model_call_free);

void model_call_cancel(ModelCall *call) {
        if (!call)
                return;
        /* Inside its own handler the call is freed once the handler returns. */
        if (call->in_handler)
                return;
        model_call_free(call);
}

static void model_call_complete(ModelCall *call, int error, const char *message, const ModelReply *reply) {
        call->in_handler = true;
        call->handler(call, error, error ? (message ?: strerror(-error)) : NULL, error ? NULL : reply, call->userdata);
        model_call_free(call);
}

static void model_call_completef(ModelCall *call, int error, const char *fmt, ...) _printf_(3, 4);
static void model_call_completef(ModelCall *call, int error, const char *fmt, ...) {
        _cleanup_free_ char *m = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        model_call_complete(call, error, m, NULL);
}

/* A short, printable excerpt of an error body for a message: the "message"
 * of an OpenAI-style error object if there is one, else the start of the
 * body. SECURITY: a server may echo the request's headers; the key is cut
 * out, and control characters cannot reach the journal. */
static char *error_excerpt(ModelCall *call) {
        _cleanup_json_ json_object *o = NULL;
        _cleanup_free_ char *copy = NULL;
        const char *s = NULL;
        char *e;

        if (call->size == 0)
                return strdup("(empty body)");

        if (json_parse_strict(call->buf, call->size, &o) >= 0 && json_object_is_type(o, json_type_object)) {
                json_object *err, *m = NULL;
                if (json_object_object_get_ex(o, "error", &err)) {
                        if (json_object_is_type(err, json_type_string))
                                m = err;
                        else
                                (void) json_object_object_get_ex(err, "message", &m);
                } else
                        (void) json_object_object_get_ex(o, "detail", &m);
                if (m && json_object_is_type(m, json_type_string))
                        s = json_object_get_string(m);
        }
        if (!s) {
                copy = strndup(call->buf, MIN(call->size, (size_t) 1024));
                if (!copy)
                        return NULL;
                s = copy;
        }

        e = strshorten_line(s, 200);
        if (!e)
                return NULL;
        if (call->api_key)
                for (char *k; (k = strstr(e, call->api_key));)
                        memset(k, '*', strlen(call->api_key));
        for (char *c = e; *c; c++)
                if ((unsigned char) *c < ' ' || *c == 127)
                        *c = '?';
        utf8_sanitize(e, strlen(e));
        return e;
}

static size_t on_curl_write(char *ptr, size_t size, size_t nmemb, void *userdata) {
        ModelCall *call = userdata;
        size_t n = size * nmemb;

        /* SECURITY: a server cannot make us keep more than max_reply_bytes. */
        if (call->size + n > call->max_reply_bytes) {
                call->too_big = true;
                return 0;
        }
        if (call->size + n + 1 > call->allocated) {
                size_t a = MAX(call->allocated * 2, call->size + n + 1);
                a = MIN(MAX(a, (size_t) 4096), (size_t) call->max_reply_bytes + 1);
                char *t = realloc(call->buf, a);
                if (!t)
                        return 0;
                call->buf = t;
                call->allocated = a;
        }
        memcpy(call->buf + call->size, ptr, n);
        call->size += n;
        call->buf[call->size] = '\0';
        return n;
}

static size_t on_curl_header(char *ptr, size_t size, size_t nmemb, void *userdata) {
        ModelCall *call = userdata;
        size_t n = size * nmemb;

        /* A new status line (after "100 Continue", say) starts over. */
        if (n >= 5 && strncasecmp(ptr, "HTTP/", 5) == 0)
                call->retry_after_sec = -1;
        else if (n > 12 && strncasecmp(ptr, "Retry-After:", 12) == 0) {
                char v[32];
                size_t i = 12, l = 0;
                uint64_t u;

                while (i < n && (ptr[i] == ' ' || ptr[i] == '\t'))
                        i++;
                while (i < n && l < sizeof(v) - 1 && ptr[i] >= '0' && ptr[i] <= '9')
                        v[l++] = ptr[i++];
                v[l] = '\0';
                /* Only delta-seconds; an HTTP date falls back to our backoff. */
                if (l > 0 && safe_atou64(v, &u) >= 0)
                        call->retry_after_sec = (int64_t) MIN(u, (uint64_t) 3600);
        }
        return n;
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata);

static int on_curl_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
        ModelClient *c = userp;
        sd_event_source *io = socketp;
        uint32_t events = 0;
        int r;

        if (what == CURL_POLL_REMOVE) {
                if (io) {
                        sd_event_source_disable_unref(io);
                        (void) curl_multi_assign(c->multi, fd, NULL);
                }
                return 0;
        }

        if (what & CURL_POLL_IN)
                events |= EPOLLIN;
        if (what & CURL_POLL_OUT)
                events |= EPOLLOUT;

        if (io) {
                r = sd_event_source_set_io_events(io, events);
                if (r >= 0)
                        r = sd_event_source_set_enabled(io, SD_EVENT_ON);
                if (r < 0)
                        return -1;
                return 0;
        }

        r = sd_event_add_io(c->event, &io, fd, events, on_io, c);
        if (r < 0) {
                log_debug_errno(r, "Failed to watch libcurl socket: %m");
                return -1;
        }
        (void) sd_event_source_set_description(io, "model-curl-io");
        if (curl_multi_assign(c->multi, fd, io) != CURLM_OK) {
                sd_event_source_disable_unref(io);
                return -1;
        }
        return 0;
}

static void model_call_finished(ModelCall *call, CURLcode result);

static void model_client_process(ModelClient *c) {
        CURLMsg *msg;
        int left;

        while ((msg = curl_multi_info_read(c->multi, &left))) {
                ModelCall *call = NULL;

                if (msg->msg != CURLMSG_DONE)
                        continue;
                if (curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &call) != CURLE_OK || !call)
                        continue;
                model_call_finished(call, msg->data.result);
        }
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ModelClient *c = userdata;
        int action = 0, running;

        if (revents & EPOLLIN)
                action |= CURL_CSELECT_IN;
        if (revents & EPOLLOUT)
                action |= CURL_CSELECT_OUT;
        if (revents & (EPOLLERR | EPOLLHUP))
                action |= CURL_CSELECT_ERR;

        (void) curl_multi_socket_action(c->multi, fd, action, &running);
        model_client_process(c);
        return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        ModelClient *c = userdata;
        int running;

        (void) curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        model_client_process(c);
        return 0;
}

static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp) {
        ModelClient *c = userp;
        uint64_t now, usec;
        int r;

        if (timeout_ms < 0) {
                if (c->timer)
                        (void) sd_event_source_set_enabled(c->timer, SD_EVENT_OFF);
                return 0;
        }

        r = sd_event_now(c->event, CLOCK_MONOTONIC, &now);
        if (r < 0)
                return -1;
        usec = now + (uint64_t) timeout_ms * USEC_PER_MSEC;

        if (c->timer) {
                r = sd_event_source_set_time(c->timer, usec);
                if (r >= 0)
                        r = sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT);
        } else {
                /* Accuracy 1 µs: the default (250 ms) would make every
                 * libcurl timeout that much later. */
                r = sd_event_add_time(c->event, &c->timer, CLOCK_MONOTONIC, usec, 1, on_timer, c);
                if (r >= 0)
                        (void) sd_event_source_set_description(c->timer, "model-curl-timer");
        }
        return r < 0 ? -1 : 0;
}

int model_client_new(sd_event *e, ModelClient **ret) {
        ModelClient *c;

        assert(e);
        assert(ret);

        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                return -EIO;

        c = calloc(1, sizeof(ModelClient));
        if (!c) {
                curl_global_cleanup();
                return -ENOMEM;
        }
        c->curl_initialized = true;
        c->event = sd_event_ref(e);
        c->multi = curl_multi_init();
        if (!c->multi) {
                model_client_free(c);
                return -ENOMEM;
        }
        if (curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket) != CURLM_OK ||
            curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c) != CURLM_OK ||
            curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer) != CURLM_OK ||
            curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c) != CURLM_OK) {
                model_client_free(c);
                return -EIO;
        }
        *ret = c;
        return 0;
}

ModelClient *model_client_free(ModelClient *c) {
        if (!c)
                return NULL;
        while (c->calls)
                model_call_free(c->calls);
        while (c->cursors) {
                ReplayCursor *n = c->cursors->next;
                free(c->cursors->path);
                model_replay_free(c->cursors->replay);
                free(c->cursors);
                c->cursors = n;
        }
        if (c->multi)
                curl_multi_cleanup(c->multi);
        sd_event_source_disable_unref(c->timer);
        sd_event_unref(c->event);
        if (c->curl_initialized)
                curl_global_cleanup();
        free(c);
        return NULL;
}

static int model_call_new(ModelClient *c, model_reply_handler_t handler, void *userdata, ModelCall **ret) {
        ModelCall *call = calloc(1, sizeof(ModelCall));
        if (!call)
                return -ENOMEM;
        call->client = c;
        call->handler = handler;
        call->userdata = userdata;
        call->retry_after_sec = -1;
        call->next = c->calls;
        if (c->calls)
                c->calls->prev = call;
        c->calls = call;
        *ret = call;
        return 0;
}

static int model_call_start_attempt(ModelCall *call) {
        call->size = 0;
        call->too_big = false;
        call->retry_after_sec = -1;
        call->attempts++;
        if (curl_multi_add_handle(call->client->multi, call->easy) != CURLM_OK)
                return -EIO;
        call->in_multi = true;
        return 0;
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        ModelCall *call = userdata;
        int r;

        call->retry_timer = sd_event_source_disable_unref(call->retry_timer);
        r = model_call_start_attempt(call);
        if (r < 0)
                model_call_completef(call, r, "Failed to start attempt %u of model request.", call->attempts);
        return 0;
}

/* Returns true if a retry was scheduled. */
static bool model_call_retry(ModelCall *call) {
        uint64_t delay, now;
        int r;

        if (call->attempts > call->max_retries)
                return false;

        if (call->retry_after_sec >= 0)
                delay = (uint64_t) call->retry_after_sec * USEC_PER_SEC;
        else {
                /* Exponential backoff: base, 2×base, 4×base, … */
                unsigned shift = MIN(call->attempts - 1, 20U);
                delay = call->retry_base_usec << shift;
        }
        delay = MIN(delay, MODEL_RETRY_MAX_USEC);

        r = sd_event_now(call->client->event, CLOCK_MONOTONIC, &now);
        if (r < 0)
                return false;
        r = sd_event_add_time(call->client->event, &call->retry_timer, CLOCK_MONOTONIC, now + delay, 1, on_retry, call);
        if (r < 0)
                return false;
        (void) sd_event_source_set_description(call->retry_timer, "model-retry");
        log_debug("Model request failed (attempt %u), retrying in %" PRIu64 " ms.", call->attempts,
                  delay / USEC_PER_MSEC);
        return true;
}

/* Failures to get any answer at all, worth another attempt. */
static bool curl_is_transient(CURLcode r) {
        return r == CURLE_COULDNT_CONNECT || r == CURLE_GOT_NOTHING || r == CURLE_SEND_ERROR || r == CURLE_RECV_ERROR;
}

/* The number after the first of the prefixes found in s. */
static uint64_t number_after(const char *s, const char *const *prefixes) {
        for (const char *const *p = prefixes; *p; p++) {
                const char *at = strcasestr(s, *p);
                uint64_t u = 0;

                if (!at)
                        continue;
                at += strlen(*p);
                at += strspn(at, " \t\"':(");
                if (*at < '0' || *at > '9')
                        continue;
                for (; *at >= '0' && *at <= '9' && u < UINT64_MAX / 10; at++)
                        u = u * 10 + (uint64_t) (*at - '0');
                return u;
        }
        return 0;
}

bool model_error_is_context_overflow(const char *body, uint64_t *ret_tokens) {
        static const char *const words[] = {
                "context_length_exceeded",                      /* OpenAI's error code */
                "maximum context length",                       /* OpenAI's and vLLM's message */
                "exceeds the available context size",           /* llama.cpp */
                "exceed_context_size_error",                    /* llama.cpp's error type */
                "context shift is disabled",                    /* llama.cpp without --context-shift */
                "input length exceeds the context length",      /* Ollama */
                "input exceeds context length",                 /* Ollama's runner */
                "reduce the length of the messages",            /* OpenAI, older */
                "prompt is too long",                           /* Anthropic's words, which some proxies pass on */
        };
        static const char *const lengths[] = {
                "maximum context length is",                    /* "This model's maximum context length is 4096 tokens" */
                "\"n_ctx\":",                                   /* llama.cpp's error object */
                "available context size (",                     /* "... exceeds the available context size (4096 tokens)" */
                NULL,
        };
        bool found = false;

        if (ret_tokens)
                *ret_tokens = 0;
        if (isempty(body))
                return false;
        for (size_t i = 0; i < ELEMENTSOF(words) && !found; i++)
                found = strcasestr(body, words[i]);
        if (found && ret_tokens)
                *ret_tokens = number_after(body, lengths);
        return found;
}

static int http_status_to_errno(long status) {
        switch (status) {
        case 400:
        case 422:
                return -EINVAL;
        case 401:
        case 403:
                return -EACCES;
        case 404:
                return -ENOENT;
        case 413:
                return -E2BIG;
        case 429:
                return -EBUSY;
        default:
                return -EREMOTEIO;
        }
}

static void model_call_finished(ModelCall *call, CURLcode result) {
        _cleanup_(model_reply_freep) ModelReply *reply = NULL;
        _cleanup_free_ char *error = NULL;
        long status = 0;
        int r;

        (void) curl_multi_remove_handle(call->client->multi, call->easy);
        call->in_multi = false;
        (void) curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &status);

        if (call->too_big || result == CURLE_FILESIZE_EXCEEDED)
                return model_call_completef(call, -EFBIG, "Model reply larger than %" PRIu64 " bytes, aborted.",
                                            call->max_reply_bytes);
        if (result == CURLE_OPERATION_TIMEDOUT)
                return model_call_completef(call, -ETIMEDOUT, "Model server did not answer within %" PRIu64 " ms.",
                                            call->timeout_usec / USEC_PER_MSEC);

        if (result != CURLE_OK) {
                /* A cut after part of a reply is not retried: the model may
                 * have done the work (and billed it), and a stream cannot be
                 * resumed. Failures to get any answer are transient. */
                if (status >= 200 && status < 300 && call->size > 0)
                        return model_call_completef(call, -EPIPE, "Model reply cut after %zu bytes: %s", call->size,
                                                    curl_easy_strerror(result));
                if (curl_is_transient(result) && model_call_retry(call))
                        return;
                return model_call_completef(call, result == CURLE_COULDNT_CONNECT ? -ECONNREFUSED : -EIO,
                                            "Model request to '%s' failed: %s", call->url, curl_easy_strerror(result));
        }

        /* A request longer than the model's context is no transient
         * failure, and not the endpoint's: the caller may send a shorter
         * one. llama.cpp says so with a 500 at times, Ollama with a 500 in
         * older versions. */
        if (status == 413 || (status >= 400 && status != 429 && call->buf &&
                              model_error_is_context_overflow(call->buf, NULL))) {
                error = error_excerpt(call);
                return model_call_completef(call, -EMSGSIZE, "HTTP %ld from model server, the request is longer than "
                                            "the model's context: %s", status, strempty(error));
        }
        if (status == 429 || status >= 500) {
                if (model_call_retry(call))
                        return;
                error = error_excerpt(call);
                return model_call_completef(call, http_status_to_errno(status), "HTTP %ld from model server after %u attempts: %s",
                                            status, call->attempts, strempty(error));
        }
        if (status < 200 || status >= 300) {
                error = error_excerpt(call);
                return model_call_completef(call, http_status_to_errno(status), "HTTP %ld from model server: %s",
                                            status, strempty(error));
        }

        r = model_reply_parse(call->buf ?: "", call->size, call->stream, &reply, &error);
        if (r < 0)
                return model_call_complete(call, r, error, NULL);

        reply->attempts = call->attempts;
        reply->request = json_object_get(call->request);
        model_call_complete(call, 0, NULL, reply);
}

static int build_request(const ModelProfile *p, json_object *messages, json_object *tools, char **ret_body,
                         json_object **ret_request) {
        _cleanup_json_ json_object *o = json_object_new_object(), *copy = NULL;
        char *body;
        int r;

        if (!o)
                return -ENOMEM;
        if (json_add_string(o, "model", p->model) < 0 ||
            json_object_object_add(o, "messages", json_object_get(messages)) < 0)
                return -ENOMEM;
        if (tools && json_object_array_length(tools) > 0 &&
            json_object_object_add(o, "tools", json_object_get(tools)) < 0)
                return -ENOMEM;
        if (p->max_tokens > 0 && json_add_uint64(o, "max_tokens", p->max_tokens) < 0)
                return -ENOMEM;
        if (p->temperature >= 0) {
                char t[32];
                snprintf(t, sizeof(t), "%g", p->temperature);
                if (json_object_object_add(o, "temperature", json_object_new_double_s(p->temperature, t)) < 0)
                        return -ENOMEM;
        }
        if (json_object_object_add(o, "stream", json_object_new_boolean(p->stream)) < 0)
                return -ENOMEM;
        if (p->stream) {
                /* Without it OpenAI itself reports no usage in streams. */
                _cleanup_json_ json_object *so = json_object_new_object();
                if (!so || json_object_object_add(so, "include_usage", json_object_new_boolean(true)) < 0 ||
                    json_object_object_add(o, "stream_options", so) < 0)
                        return -ENOMEM;
                so = NULL;
        }

        body = strdup(json_to_line(o) ?: "");
        if (!body)
                return -ENOMEM;
        /* A copy of our own for the transcript: the caller goes on changing
         * its conversation. */
        r = json_parse_strict(body, strlen(body), &copy);
        if (r < 0) {
                free(body);
                return r;
        }
        *ret_body = body;
        *ret_request = TAKE_PTR(copy);
        return 0;
}

static int append_header(struct curl_slist **l, const char *h) {
        struct curl_slist *n = curl_slist_append(*l, h);
        if (!n)
                return -ENOMEM;
        *l = n;
        return 0;
}

static int model_call_setup_http(ModelCall *call, const ModelProfile *p, const char *api_key) {
        size_t l = strlen(p->endpoint);
        CURL *e;

        while (l > 0 && p->endpoint[l - 1] == '/')
                l--;
        if (asprintf(&call->url, "%.*s/chat/completions", (int) l, p->endpoint) < 0)
                return -ENOMEM;

        if (append_header(&call->headers, "Content-Type: application/json") < 0 ||
            append_header(&call->headers, p->stream ? "Accept: text/event-stream" : "Accept: application/json") < 0 ||
            append_header(&call->headers, "Expect:") < 0)
                return -ENOMEM;
        if (api_key) {
                _cleanup_free_ char *h = NULL;
                int r;

                call->api_key = strdup(api_key);
                if (!call->api_key)
                        return -ENOMEM;
                if (asprintf(&h, "Authorization: Bearer %s", api_key) < 0)
                        return -ENOMEM;
                r = append_header(&call->headers, h);
                explicit_bzero(h, strlen(h));
                if (r < 0)
                        return r;
        }

        call->easy = e = curl_easy_init();
        if (!e)
                return -ENOMEM;

        /* SECURITY: http and https only, also for any redirect, and no
         * redirects at all: a model server has no business sending our
         * conversation (and key) elsewhere. NOSIGNAL: we are a daemon with
         * our own signal handling, and libcurl must not touch SIGALRM. */
        if (curl_easy_setopt(e, CURLOPT_URL, call->url) != CURLE_OK ||
            curl_restrict_protocols(e) < 0 ||
            curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_PRIVATE, call) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_HTTPHEADER, call->headers) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_POSTFIELDS, call->body) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) strlen(call->body)) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_curl_write) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_WRITEDATA, call) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_curl_header) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_HEADERDATA, call) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_USERAGENT, "agentfab/" PROJECT_VERSION) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t) p->max_reply_bytes) != CURLE_OK)
                return -EIO;
        if (p->timeout_usec > 0 &&
            curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long) MAX(p->timeout_usec / USEC_PER_MSEC, (uint64_t) 1)) != CURLE_OK)
                return -EIO;
        if (p->connect_timeout_usec > 0 &&
            curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                             (long) MAX(p->connect_timeout_usec / USEC_PER_MSEC, (uint64_t) 1)) != CURLE_OK)
                return -EIO;
        return 0;
}

static int on_replay_defer(sd_event_source *s, void *userdata) {
        _cleanup_(model_reply_freep) ModelReply *reply = NULL;
        ModelCall *call = userdata;
        int r;

        call->defer = sd_event_source_disable_unref(call->defer);

        if (!call->replay) {
                model_call_completef(call, -ECANCELED, "Transcript cursor was reset.");
                return 0;
        }

        r = model_replay_next(call->replay, &reply, NULL);
        if (r == -ENODATA)
                model_call_completef(call, r, "Transcript exhausted after %zu exchanges.",
                                     model_replay_position(call->replay));
        else if (r < 0)
                model_call_completef(call, r, "Exchange %zu of the transcript is invalid.",
                                     model_replay_position(call->replay));
        else
                model_call_complete(call, 0, NULL, reply);
        return 0;
}

int model_client_chat_replay(ModelClient *c, ModelReplay *replay, model_reply_handler_t handler, void *userdata,
                             ModelCall **ret_call) {
        _cleanup_(model_call_freep) ModelCall *call = NULL;
        int r;

        assert(c);
        assert(replay);
        assert(handler);

        r = model_call_new(c, handler, userdata, &call);
        if (r < 0)
                return r;
        call->replay = replay;
        r = sd_event_add_defer(c->event, &call->defer, on_replay_defer, call);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(call->defer, "model-replay");
        if (ret_call)
                *ret_call = call;
        TAKE_PTR(call);
        return 0;
}

static int model_client_get_cursor(ModelClient *c, const char *path, ModelReplay **ret) {
        ReplayCursor *k;
        int r;

        for (k = c->cursors; k; k = k->next)
                if (streq(k->path, path)) {
                        *ret = k->replay;
                        return 0;
                }

        k = calloc(1, sizeof(ReplayCursor));
        if (!k)
                return -ENOMEM;
        k->path = strdup(path);
        if (!k->path) {
                free(k);
                return -ENOMEM;
        }
        r = model_replay_open(path, &k->replay);
        if (r < 0) {
                free(k->path);
                free(k);
                return r;
        }
        k->next = c->cursors;
        c->cursors = k;
        *ret = k->replay;
        return 0;
}

void model_client_replay_reset(ModelClient *c, const char *path) {
        for (ReplayCursor **k = &c->cursors; *k;) {
                ReplayCursor *i = *k;
                if (path && !streq(i->path, path)) {
                        k = &i->next;
                        continue;
                }
                /* A call still waiting for its defer source keeps a pointer. */
                for (ModelCall *call = c->calls; call; call = call->next)
                        if (call->replay == i->replay)
                                call->replay = NULL;
                *k = i->next;
                free(i->path);
                model_replay_free(i->replay);
                free(i);
        }
}

int model_client_chat(ModelClient *c, const ModelProfile *p, const char *api_key, json_object *messages,
                      json_object *tools, model_reply_handler_t handler, void *userdata, ModelCall **ret_call) {
        _cleanup_(model_call_freep) ModelCall *call = NULL;
        _cleanup_json_ json_object *text_messages = NULL;
        int r;

        assert(c);
        assert(p);
        assert(handler);

        if (p->kind == MODEL_KIND_REPLAY) {
                ModelReplay *replay;

                if (!p->replay_path)
                        return -EINVAL;
                r = model_client_get_cursor(c, p->replay_path, &replay);
                if (r < 0)
                        return r;
                return model_client_chat_replay(c, replay, handler, userdata, ret_call);
        }

        if (p->kind != MODEL_KIND_OPENAI || !model_endpoint_is_valid(p->endpoint) || isempty(p->model))
                return -EINVAL;
        if (!messages || !json_object_is_type(messages, json_type_array))
                return -EINVAL;
        if (tools && !json_object_is_type(tools, json_type_array))
                return -EINVAL;
        /* SECURITY: the key goes into a header line. */
        if (api_key && (isempty(api_key) || !string_is_safe(api_key, false)))
                return -EINVAL;

        /* ToolCalls=text: a server without tool support gets no "tools",
         * but their description in the system prompt and the calls and
         * results of the conversation written as text. */
        if (p->tool_calls == MODEL_TOOL_CALLS_TEXT) {
                r = model_text_calls_messages(messages, tools, &text_messages);
                if (r < 0)
                        return r;
                messages = text_messages;
                tools = NULL;
        }

        r = model_call_new(c, handler, userdata, &call);
        if (r < 0)
                return r;
        call->stream = p->stream;
        call->max_retries = p->max_retries;
        call->retry_base_usec = p->retry_base_usec;
        call->max_reply_bytes = p->max_reply_bytes;
        call->timeout_usec = p->timeout_usec;

        r = build_request(p, messages, tools, &call->body, &call->request);
        if (r < 0)
                return r;
        r = model_call_setup_http(call, p, api_key);
        if (r < 0)
                return r;
        r = model_call_start_attempt(call);
        if (r < 0)
                return r;

        if (ret_call)
                *ret_call = call;
        TAKE_PTR(call);
        return 0;
}
