// LEAVE's body as the worker makes it and the scheduler checks it: every malformed form is
// refused with INVALID_ARGUMENT before anything acts on it.
#include "common/leave_request.h"

#include <string>

#include "gtest/gtest.h"

namespace r2sp {
namespace {

proto::Header Leave(const proto::LeaveRequest& leave) {
  proto::Header header;
  header.set_type(proto::LEAVE);
  *header.mutable_leave() = leave;
  return header;
}

TEST(LeaveRequestTest, WhatTheWorkerMakesTheSchedulerTakes) {
  proto::NodeCounters counters;
  counters.set_iterations(42);
  const absl::StatusOr<proto::LeaveRequest> decoded =
      DecodeLeaveRequest(Leave(MakeLeaveRequest("signal 15", counters)));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->reason(), "signal 15");
  EXPECT_EQ(decoded->counters().iterations(), 42u);
  // An empty reason is given one; a long one is cut to the limit, and both decode.
  EXPECT_EQ(MakeLeaveRequest("", counters).reason(), "stopped");
  const proto::LeaveRequest long_one = MakeLeaveRequest(std::string(500, 'x'), counters);
  EXPECT_EQ(long_one.reason().size(), kMaxLeaveReasonBytes);
  EXPECT_TRUE(DecodeLeaveRequest(Leave(long_one)).ok());
}

TEST(LeaveRequestTest, MalformedLeavesAreRefused) {
  proto::Header no_body;
  no_body.set_type(proto::LEAVE);
  EXPECT_EQ(DecodeLeaveRequest(no_body).status().code(), absl::StatusCode::kInvalidArgument);
  proto::LeaveRequest leave;
  EXPECT_EQ(DecodeLeaveRequest(Leave(leave)).status().code(),
            absl::StatusCode::kInvalidArgument);  // no reason
  leave.set_reason(std::string(kMaxLeaveReasonBytes + 1, 'x'));
  EXPECT_EQ(DecodeLeaveRequest(Leave(leave)).status().message(),
            "LEAVE needs a reason of 1 to 200 bytes, not 201");
  leave.set_reason("signal 15");
  proto::Header finish = Leave(leave);
  finish.set_type(proto::FINISH);
  EXPECT_EQ(DecodeLeaveRequest(finish).status().message(), "not a LEAVE: FINISH");
  // The largest reason allowed passes.
  leave.set_reason(std::string(kMaxLeaveReasonBytes, 'x'));
  EXPECT_TRUE(DecodeLeaveRequest(Leave(leave)).ok());
}

}  // namespace
}  // namespace r2sp
