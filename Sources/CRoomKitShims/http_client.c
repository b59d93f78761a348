#include "CRoomKitHTTPClient.h"
#include <libwebsockets.h>
#include <string.h>

int roomkit_lws_client_append_header(struct lws *wsi, void *in, size_t len,
                                     const char *name, const char *value) {
    unsigned char **p = (unsigned char **)in;
    unsigned char *end = (*p) + len;
    if (lws_add_http_header_by_name(wsi, (const unsigned char *)name,
                                    (const unsigned char *)value, (int)strlen(value), p, end))
        return -1;
    return 0;
}

int roomkit_lws_client_http_read(struct lws *wsi) {
    char buffer[LWS_PRE + 16384];
    char *px = buffer + LWS_PRE;
    int lenx = (int)(sizeof(buffer) - LWS_PRE);
    return lws_http_client_read(wsi, &px, &lenx);
}
