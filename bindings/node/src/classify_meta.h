// bindings/node/src/classify_meta.h: a JS { status, headers, body } read as a
// fusebox::meta::Response, for classifyMeta() and runProviderCall.
#ifndef FUSEBOX_NODE_CLASSIFY_META_H_
#define FUSEBOX_NODE_CLASSIFY_META_H_

#include <napi.h>

#include <string_view>

#include "fusebox/meta/response.h"

namespace fusebox::node {

// Throws a TypeError/RangeError naming `where`.<field> on a bad field.
meta::Response ReadMetaResponse(Napi::Env env, const Napi::Value& value, std::string_view where);

}  // namespace fusebox::node

#endif  // FUSEBOX_NODE_CLASSIFY_META_H_
