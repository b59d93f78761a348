#ifndef ROOMKIT_HTTP_CLIENT_H
#define ROOMKIT_HTTP_CLIENT_H
/*
 * The two lws client-HTTP steps Swift cannot do cleanly: writing a request
 * header through lws's pointer-to-pointer cursor, and draining the body with
 * lws_http_client_read into a buffer that has LWS_PRE bytes of headroom.
 *
 * Threading: call only from inside the named callback of that wsi, on the
 * thread that services its context (the event loop).
 */
#include <stddef.h>

struct lws;

/** In LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER, appends "name: value".
 *  `in` and `len` are that callback's arguments; `name` ends with ':'.
 *  Returns 0, or -1 when the header does not fit. */
int roomkit_lws_client_append_header(struct lws *wsi, void *in, size_t len,
                                     const char *name, const char *value);

/** In LWS_CALLBACK_RECEIVE_CLIENT_HTTP, drains what arrived; lws strips any
 *  chunked framing and delivers the payload as LWS_CALLBACK_RECEIVE_CLIENT_HTTP_READ
 *  before this returns. Returns lws_http_client_read's result (< 0: close). */
int roomkit_lws_client_http_read(struct lws *wsi);

#endif
