#include "probe_server.h"

#include <string_view>

namespace fusebox::grpc::testing {

::grpc::Status ProbeServer::Service::Ask(::grpc::ServerContext* context,
                                         const fuseboxtest::AskRequest* request,
                                         fuseboxtest::AskReply* reply) {
  reply->set_calls(++calls);
  if (request->hang()) {
    std::unique_lock lock(mu);
    cv.wait(lock, [this] { return released; });
    return ::grpc::Status::OK;
  }
  if (request->has_pushback()) {
    context->AddTrailingMetadata("grpc-retry-pushback-ms", request->pushback());
  }
  if (request->code() == 0) return ::grpc::Status::OK;
  return {static_cast<::grpc::StatusCode>(request->code()), "probe answers as asked"};
}

ProbeServer::ProbeServer() {
  ::grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", ::grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(&service_);
  server_ = builder.BuildAndStart();
}

ProbeServer::~ProbeServer() {
  Release();
  if (server_ != nullptr) server_->Shutdown();
}

void ProbeServer::Release() {
  {
    std::lock_guard lock(service_.mu);
    service_.released = true;
  }
  service_.cv.notify_all();
}

std::unique_ptr<fuseboxtest::Probe::Stub> ProbeServer::NewStub() const {
  return fuseboxtest::Probe::NewStub(
      ::grpc::CreateChannel(address(), ::grpc::InsecureChannelCredentials()));
}

}  // namespace fusebox::grpc::testing
