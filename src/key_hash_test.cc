// The key hash's secret: keys that a client picked to share their low bits
// under one secret (or under a hash anyone can compute) are spread under
// another, and each process draws its own.

#include "fusebox/internal/key_hash.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "fusebox/registry.h"
#include "src/registry_hash.h"

extern char** environ;

namespace fusebox {
namespace {

using internal::HashKey;
using internal::HashSecret;

constexpr HashSecret kSecretX{0x0123456789abcdefull, 0xfedcba9876543210ull};
constexpr HashSecret kSecretY{0x1111111111111111ull, 0x2222222222222222ull};

// `count` keys built by `make` whose hashes under `secret` share their low 12
// bits: what a client that knew the secret would send.
template <typename Make>
std::vector<std::string> Colliding(const HashSecret& secret, int count, Make make) {
  std::vector<std::string> keys;
  for (long long i = 0; static_cast<int>(keys.size()) < count; ++i) {
    std::string key = make(i);
    if ((HashKey(key, secret) & 0xFFF) == 0) keys.push_back(std::move(key));
  }
  return keys;
}

std::size_t DistinctLowBits(const std::vector<std::string>& keys, const HashSecret& secret) {
  std::set<std::uint64_t> low;
  for (const std::string& key : keys) low.insert(HashKey(key, secret) & 0xFFF);
  return low.size();
}

TEST(KeyHashSecret, KeysCollidingUnderOneSecretSpreadUnderAnother) {
  // One key shape per path of the hash: up to 16 bytes, 17 to 48 (seed 000's
  // keys), and over 48.
  const std::vector<std::vector<std::string>> sets = {
      Colliding(kSecretX, 64, [](long long i) { return "k:" + std::to_string(i); }),
      Colliding(kSecretX, 64,
                [](long long i) {
                  return "meta:read:" + std::to_string(17841400000000000LL + i) + ":quota";
                }),
      Colliding(kSecretX, 64, [](long long i) {
        return "graph-api:write:" + std::to_string(i) + ":" + std::string(48, 'x');
      })};
  for (const auto& keys : sets) {
    SCOPED_TRACE(keys.front());
    ASSERT_EQ(DistinctLowBits(keys, kSecretX), 1u);
    // 64 keys over 4,096 values: about 63.5 distinct for a fair hash.
    EXPECT_GE(DistinctLowBits(keys, kSecretY), 56u);
    EXPECT_GE(DistinctLowBits(keys, internal::ProcessHashSecret()), 56u);
  }
}

// A multiply whose operand is zero is zero whatever the other: if a lane's
// constant were public, a key whose word at that lane equals it would zero the
// lane, and keys differing only in the bytes that lane then ignores would
// all collide, under every secret. The lanes' constants are keyed too.
TEST(KeyHashSecret, NoKeyZeroesALaneWithoutTheSecret) {
  auto bytes_of = [](std::uint64_t w) {
    std::string s(8, '\0');
    std::memcpy(s.data(), &w, 8);
    return s;
  };
  // 40 bytes: the three lanes read their first operand at 0, 24 and 16 and
  // their second at 8, 32 and 24; those three words are the constants the
  // lanes would use bare, and the bytes at 8 and 32 vary.
  std::vector<std::string> keys;
  for (int i = 0; i < 64; ++i) {
    std::string free(8, static_cast<char>('a' + i % 26));
    free[0] = static_cast<char>('0' + i / 26);
    std::string key = bytes_of(internal::kK1);
    key += free;
    key += bytes_of(internal::kK3);
    key += bytes_of(internal::kK2);
    key += free;
    keys.push_back(std::move(key));
    ASSERT_EQ(keys.back().size(), 40u);
  }
  auto distinct = [&](const HashSecret& secret) {
    std::set<std::uint64_t> hashes;
    for (const std::string& key : keys) hashes.insert(HashKey(key, secret));
    return hashes.size();
  };
  // With the lanes' constants bare (the secret's first word 0), every lane
  // is zeroed and all 64 keys hash alike: the attack.
  ASSERT_EQ(distinct(HashSecret{0, kSecretX.b}), 1u);
  EXPECT_EQ(distinct(kSecretX), 64u);
  EXPECT_EQ(distinct(internal::ProcessHashSecret()), 64u);
}

TEST(KeyHashSecret, EveryHashOfTheProcessUsesItsSecret) {
  for (const std::string& key : std::vector<std::string>{
           "", "a", "k:1", "meta:read:17841400000000001:quota", std::string(100, 'q')}) {
    const std::uint64_t want = HashKey(key, internal::ProcessHashSecret());
    EXPECT_EQ(RegistryKey::Hash(key), want) << key;
    EXPECT_EQ(RegistryKey(key).hash(), want) << key;
    EXPECT_EQ(internal::KeyHash{}(key), static_cast<std::size_t>(want)) << key;
    EXPECT_NE(HashKey(key, kSecretX), HashKey(key, kSecretY)) << key;
  }
  EXPECT_EQ(&internal::ProcessHashSecret(), &internal::ProcessHashSecret());
}

TEST(KeyHashSecret, EachDrawIsFresh) {
  const HashSecret a = internal::NewHashSecret();
  const HashSecret b = internal::NewHashSecret();
  EXPECT_FALSE(a.a == b.a && a.b == b.b);
  EXPECT_NE(a.a, a.b);
}

// The hash of one key in this process and in two others.
TEST(KeyHashSecret, TheSecretIsDrawnAnewByEachProcess) {
  std::set<std::string> seen = {
      std::to_string(RegistryKey::Hash("meta:read:17841400000000001:quota"))};
  for (int child = 0; child < 2; ++child) {
    int out[2];
    ASSERT_EQ(pipe(out), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    std::string exe = FUSEBOX_HASH_PROBE_CHILD;
    char* argv[] = {exe.data(), nullptr};
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    ASSERT_EQ(rc, 0) << exe;
    std::string printed;
    char buf[64];
    ssize_t n;
    while ((n = read(out[0], buf, sizeof buf)) > 0)
      printed.append(buf, static_cast<std::size_t>(n));
    close(out[0]);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << printed;
    ASSERT_FALSE(printed.empty());
    seen.insert(printed.substr(0, printed.find('\n')));
  }
  EXPECT_EQ(seen.size(), 3u) << "two processes hashed a key alike";
}

}  // namespace
}  // namespace fusebox
