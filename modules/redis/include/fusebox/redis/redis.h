// fusebox/redis/redis.h: includes the whole API of fusebox::redis (breaker state shared through
// Redis, hiredis).
//
//   #include <fusebox/redis/redis.h>
//
// Prefer including the headers you use; this one is for quick starts. Checked,
// with every other public header, by cmake/HeaderCheck.cmake.
#ifndef FUSEBOX_REDIS_REDIS_H_
#define FUSEBOX_REDIS_REDIS_H_

#include "fusebox/redis/circuit_scripts.h"  // IWYU pragma: export
#include "fusebox/redis/connection.h"       // IWYU pragma: export
#include "fusebox/redis/keyspace.h"         // IWYU pragma: export
#include "fusebox/redis/options.h"          // IWYU pragma: export
#include "fusebox/redis/reply.h"            // IWYU pragma: export
#include "fusebox/redis/script.h"           // IWYU pragma: export
#include "fusebox/redis/shared_state.h"     // IWYU pragma: export
#include "fusebox/redis/snapshot_store.h"   // IWYU pragma: export

#endif  // FUSEBOX_REDIS_REDIS_H_
