#ifndef ROOMKIT_SHIMS_H
#define ROOMKIT_SHIMS_H
/*
 * What Swift cannot import cleanly from libwebsockets: expression macros
 * (LWS_PRE, option bits), the varargs logging macros, header-token enums
 * whose numbering depends on lws's build flags, and the pointer-to-pointer
 * HTTP header writers. Each function is a thin wrapper; none allocates.
 *
 * Threading: like lws itself, every function that takes a wsi must be
 * called on the thread that services that wsi's context (the event loop).
 */
#include <stddef.h>
#include <stdint.h>

struct lws;

/** Bytes lws needs in front of a buffer handed to lws_write (LWS_PRE). */
size_t roomkit_lws_pre(void);

/** Context option bits (LWS_SERVER_OPTION_*), combined for our two uses. */
uint64_t roomkit_lws_options_client(void);
uint64_t roomkit_lws_options_server(int tls);

/** Route lws's own log lines (ERR and WARN, plus NOTICE when verbose) to emit. */
void roomkit_lws_set_log(int verbose, void (*emit)(int level, const char *line));

/** The request method: "GET", "POST", "OPTIONS", "HEAD", or NULL if none. */
const char *roomkit_lws_http_method(struct lws *wsi);

/** Copies the request path (without query) into buf; returns its length or -1. */
int roomkit_lws_http_path(struct lws *wsi, char *buf, int len);

/** Copies the raw query string ("a=1&b=2") into buf; returns its length (0 if none). */
int roomkit_lws_http_query(struct lws *wsi, char *buf, int len);

/** Well-known request headers we read. */
enum roomkit_header {
    ROOMKIT_HEADER_AUTHORIZATION = 0,
    ROOMKIT_HEADER_CONTENT_TYPE = 1,
    ROOMKIT_HEADER_CONTENT_LENGTH = 2,
    ROOMKIT_HEADER_WS_PROTOCOL = 3,
    ROOMKIT_HEADER_HOST = 4,
};

/** Copies a request header into buf; returns its length, or -1 if absent/too long. */
int roomkit_lws_header(struct lws *wsi, enum roomkit_header which, char *buf, int len);

/** Writes a complete HTTP/1.1 response head: status, content type, content
 *  length (-1 for none), and `count` extra header name/value pairs.
 *  Returns 0 on success, -1 when the head could not be written. */
int roomkit_lws_write_http_head(struct lws *wsi, unsigned int status,
                                const char *content_type, int64_t content_length,
                                const char *const *names, const char *const *values,
                                int count);

/** Closes a wsi now. With a close reason set (lws_close_reason) lws sends
 *  the close frame and waits for the peer's ack; without one it drops the
 *  socket. Must not be called from inside one of that wsi's callbacks. */
void roomkit_lws_close_now(struct lws *wsi);

/* Client-side HTTP helpers (HTTPClient). */
#include "CRoomKitHTTPClient.h"

#endif
