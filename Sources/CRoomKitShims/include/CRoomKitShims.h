#ifndef ROOMKIT_SHIMS_H
#define ROOMKIT_SHIMS_H
/*
 * What Swift cannot import cleanly from libwebsockets: expression macros
 * (LWS_PRE, option bits), the varargs logging macros, header-token enums
 * whose numbering depends on lws's build flags, and the pointer-to-pointer
 * HTTP header writers. Each function is a thin wrapper; none allocates,
 * except the client TLS context (owned by the caller, see below).
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

struct ssl_ctx_st;

/** The client TLS context of an lws context that has TLS on, made as lws 4.1
 *  makes its own (TLS client method, no compression; with `trust` the OS's
 *  CA certificates plus `ca_file` when given; without, no trust store, for
 *  listeners, which never connect out but get a client context all the same).
 *  The caller owns it: it goes in `provided_client_ssl_ctx` and is freed
 *  with roomkit_client_ssl_ctx_free once the lws context is destroyed.
 *  Why we own it: lws 4.1 finds its own client SSL_CTX again at destroy time
 *  through an OpenSSL ex-data index that every new context re-allocates, so
 *  a context destroyed after another one was created never frees it (the
 *  SSL_CTX and its CA store, ~680 KB, leak). Sets *ca_loaded to 0 when
 *  `ca_file` could not be loaded (as with lws, the context is still returned
 *  and verification then fails). NULL on failure. */
struct ssl_ctx_st *roomkit_client_ssl_ctx_new(int trust, const char *ca_file, int *ca_loaded);
void roomkit_client_ssl_ctx_free(struct ssl_ctx_st *ctx);

/** Names the calling thread (as `top` and debuggers show it); Linux keeps
 *  the first 15 bytes. */
void roomkit_set_thread_name(const char *name);

/// The loop running on the calling thread (an opaque `EventLoop` pointer), or
/// NULL: set once by each loop thread, so "am I on this loop?" is one
/// thread-local read instead of a lock (NIO's thread-specific check).
extern __thread void *roomkit_current_loop;
static inline void *roomkit_get_current_loop(void) { return roomkit_current_loop; }
static inline void roomkit_set_current_loop(void *loop) { roomkit_current_loop = loop; }

/** Route lws's own log lines (ERR and WARN, plus NOTICE when verbose) to emit. */
void roomkit_lws_set_log(int verbose, void (*emit)(int level, const char *line));

/** The request method: "GET", "POST", "OPTIONS", "HEAD", "PUT" (when libwebsockets parses it), or NULL if none. */
const char *roomkit_lws_http_method(struct lws *wsi);

/** Copies the request path (without query) into buf; returns its length or -1. */
int roomkit_lws_http_path(struct lws *wsi, char *buf, int len);

/** Copies the raw query string ("a=1&b=2") into buf; returns its length (0 if none). */
int roomkit_lws_http_query(struct lws *wsi, char *buf, int len);
/* The query's argument `index` ("name=value", percent-decoded by lws), or -1 past the last. */
int roomkit_lws_http_query_argument(struct lws *wsi, int index, char *buf, int len);

/** Well-known request headers we read. */
enum roomkit_header {
    ROOMKIT_HEADER_AUTHORIZATION = 0,
    ROOMKIT_HEADER_CONTENT_TYPE = 1,
    ROOMKIT_HEADER_CONTENT_LENGTH = 2,
    ROOMKIT_HEADER_WS_PROTOCOL = 3,
    ROOMKIT_HEADER_HOST = 4,
    ROOMKIT_HEADER_ORIGIN = 5,
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
