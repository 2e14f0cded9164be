// The in-process gRPC server of fusebox::grpc's tests and benchmark: the
// Probe service of probe.proto on 127.0.0.1, on a port gRPC picks, answering
// each Ask with the code (and grpc-retry-pushback-ms trailer) the request
// names, counting the calls it receives.
#ifndef FUSEBOX_MODULES_GRPC_TEST_PROBE_SERVER_H_
#define FUSEBOX_MODULES_GRPC_TEST_PROBE_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "probe.grpc.pb.h"

namespace fusebox::grpc::testing {

class ProbeServer {
 public:
  // Starts the server; check ok() (a port could not be bound otherwise).
  ProbeServer();
  // Releases held calls, then shuts the server down.
  ~ProbeServer();
  ProbeServer(const ProbeServer&) = delete;
  ProbeServer& operator=(const ProbeServer&) = delete;

  bool ok() const { return server_ != nullptr && port_ > 0; }
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  // Calls received so far (held ones included).
  std::int64_t calls() const { return service_.calls.load(); }

  // Lets every held (hang: true) call return OK.
  void Release();

  // A stub on a fresh insecure channel to this server.
  std::unique_ptr<fuseboxtest::Probe::Stub> NewStub() const;

 private:
  class Service final : public fuseboxtest::Probe::Service {
   public:
    ::grpc::Status Ask(::grpc::ServerContext* context, const fuseboxtest::AskRequest* request,
                       fuseboxtest::AskReply* reply) override;

    std::atomic<std::int64_t> calls{0};
    std::mutex mu;
    std::condition_variable cv;
    bool released = false;
  };

  Service service_;
  int port_ = 0;
  std::unique_ptr<::grpc::Server> server_;
};

}  // namespace fusebox::grpc::testing

#endif  // FUSEBOX_MODULES_GRPC_TEST_PROBE_SERVER_H_
