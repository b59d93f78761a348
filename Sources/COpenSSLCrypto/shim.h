#ifndef ROOMKIT_COPENSSLCRYPTO_SHIM_H
#define ROOMKIT_COPENSSLCRYPTO_SHIM_H
#include <openssl/hmac.h>
#include <openssl/evp.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#endif
