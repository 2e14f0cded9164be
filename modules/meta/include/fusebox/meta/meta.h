// fusebox/meta/meta.h: includes the whole API of fusebox::meta (Meta Graph API signals).
//
//   #include <fusebox/meta/meta.h>
//
// Prefer including the headers you use; this one is for quick starts. Checked,
// with every other public header, by cmake/HeaderCheck.cmake.
#ifndef FUSEBOX_META_META_H_
#define FUSEBOX_META_META_H_

#include "fusebox/meta/classify.h"       // IWYU pragma: export
#include "fusebox/meta/provider_call.h"  // IWYU pragma: export
#include "fusebox/meta/recovery.h"       // IWYU pragma: export
#include "fusebox/meta/redact.h"         // IWYU pragma: export
#include "fusebox/meta/response.h"       // IWYU pragma: export

#endif  // FUSEBOX_META_META_H_
