// bindings/node/src/classify_meta.cc: classifyMeta(), fusebox::meta's
// classifier over a JS { status, headers, body } (docs/node.md, docs/meta.md).
#include "classify_meta.h"

#include <cmath>
#include <string>
#include <utility>

#include "addon.h"
#include "fusebox/meta/classify.h"
#include "fusebox/meta/response.h"

namespace fusebox::node {

meta::Response ReadMetaResponse(Napi::Env env, const Napi::Value& value, std::string_view where) {
  const std::string w(where);
  if (!value.IsObject())
    throw Napi::TypeError::New(env, w + " must be an object { status, headers, body }");
  const Napi::Object o = value.As<Napi::Object>();
  meta::Response r;
  const Napi::Value status = o.Get("status");
  if (!status.IsNumber()) throw Napi::TypeError::New(env, w + ".status must be a number");
  const double s = status.As<Napi::Number>().DoubleValue();
  if (!(s >= 0 && s <= 999) || std::floor(s) != s) {
    throw Napi::RangeError::New(
        env, w + ".status must be an integer in [0, 999], got " + status.ToString().Utf8Value());
  }
  r.status = static_cast<int>(s);
  const Napi::Value headers = o.Get("headers");
  if (!headers.IsUndefined() && !headers.IsNull()) {
    if (!headers.IsObject() || headers.IsArray()) {
      throw Napi::TypeError::New(env, w + ".headers must be an object of name: value");
    }
    const Napi::Object h = headers.As<Napi::Object>();
    const Napi::Array names = h.GetPropertyNames();
    for (uint32_t i = 0; i < names.Length(); ++i) {
      std::string name = names.Get(i).ToString().Utf8Value();
      const Napi::Value v = h.Get(name);
      if (!v.IsString() && !v.IsNumber()) {
        std::string message = w;
        message.append(".headers[\"").append(name).append("\"] must be a string");
        throw Napi::TypeError::New(env, message);
      }
      r.headers.emplace_back(std::move(name), v.ToString().Utf8Value());
    }
  }
  const Napi::Value body = o.Get("body");
  if (!body.IsUndefined() && !body.IsNull()) {
    if (!body.IsString()) throw Napi::TypeError::New(env, w + ".body must be a string");
    r.body = body.As<Napi::String>().Utf8Value();
  }
  return r;
}

namespace {

// classifyMeta({ status, headers, body }) ->
//   { class: 'rate-limit'|'transient'|'authorization'|'invalid',
//     retryAfterSeconds: number|null, reason, metaCode, metaSubcode }
Napi::Value ClassifyMeta(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const meta::Response r = ReadMetaResponse(env, info[0], "classifyMeta(response): response");
  const meta::Classification c = meta::Classify(r);
  Napi::Object out = Napi::Object::New(env);
  out.Set("class", std::string(meta::KindName(c.kind)));
  out.Set("retryAfterSeconds",
          c.retry_after
              ? Napi::Value(Napi::Number::New(env, static_cast<double>(c.retry_after->count())))
              : Napi::Value(env.Null()));
  out.Set("reason", c.reason);
  out.Set("metaCode", c.error.code
                          ? Napi::Value(Napi::Number::New(env, static_cast<double>(*c.error.code)))
                          : Napi::Value(env.Null()));
  out.Set("metaSubcode", c.error.subcode ? Napi::Value(Napi::Number::New(
                                               env, static_cast<double>(*c.error.subcode)))
                                         : Napi::Value(env.Null()));
  return out;
}

}  // namespace

void InitClassifyMeta(Napi::Env env, Napi::Object exports) {
  exports.Set("classifyMeta", Napi::Function::New<ClassifyMeta>(env, "classifyMeta"));
}

}  // namespace fusebox::node
