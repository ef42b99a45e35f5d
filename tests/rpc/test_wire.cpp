// The field codec and frame headers of docs/rpc-protocol.md sections 2 and 3:
// exact little-endian bytes, round trips, and bounds checks that throw.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "protocol/wire.h"
#include "weft/core/error.h"

namespace weft::rpc {
namespace {

// Runs f, expects Error(invalid_input) whose message contains each of parts.
template <typename F>
void expect_invalid(F&& f, std::initializer_list<const char*> parts) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning " << *parts.begin();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_input) << e.what();
    for (const char* p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(RpcWire, FieldsAreLittleEndianByteByByte) {
  Writer w;
  w.u8(0xAB);
  w.u16(0x0102);
  w.u32(0x03040506);
  w.u64(0x0708090A0B0C0D0Eull);
  w.i32(-2);
  w.f32(1.0f);
  const std::vector<uint8_t> expected = {0xAB, 0x02, 0x01, 0x06, 0x05, 0x04, 0x03, 0x0E, 0x0D, 0x0C, 0x0B, 0x0A,
                                         0x09, 0x08, 0x07, 0xFE, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x80, 0x3F};
  EXPECT_EQ(w.data(), expected);
}

TEST(RpcWire, RoundTripsEveryFieldType) {
  Writer w;
  w.u8(0);
  w.u8(255);
  w.u16(65535);
  w.u32(0xDEADBEEF);
  w.u64(UINT64_MAX);
  w.i32(INT32_MIN);
  w.i64(INT64_MIN);
  w.i64(-1);
  w.f32(-0.0f);
  w.f32(std::numeric_limits<float>::infinity());
  uint32_t nan_bits = 0x7FC12345;
  float nan;
  std::memcpy(&nan, &nan_bits, 4);
  w.f32(nan);
  w.str("");
  w.str("héllo");
  const uint8_t raw[3] = {1, 2, 3};
  w.bytes(raw, 3);
  w.bytes(nullptr, 0);

  Reader r(w.data(), "TEST");
  EXPECT_EQ(r.u8(), 0);
  EXPECT_EQ(r.u8(), 255);
  EXPECT_EQ(r.u16(), 65535);
  EXPECT_EQ(r.u32(), 0xDEADBEEF);
  EXPECT_EQ(r.u64(), UINT64_MAX);
  EXPECT_EQ(r.i32(), INT32_MIN);
  EXPECT_EQ(r.i64(), INT64_MIN);
  EXPECT_EQ(r.i64(), -1);
  const float z = r.f32();
  EXPECT_EQ(z, 0.0f);
  EXPECT_TRUE(std::signbit(z));
  EXPECT_TRUE(std::isinf(r.f32()));
  const float n = r.f32();
  uint32_t got_bits;
  std::memcpy(&got_bits, &n, 4);
  EXPECT_EQ(got_bits, nan_bits);  // NaN payloads survive
  EXPECT_EQ(r.str(), "");
  EXPECT_EQ(r.str(), "héllo");
  auto b = r.bytes(3);
  EXPECT_EQ(std::vector<uint8_t>(b.begin(), b.end()), std::vector<uint8_t>({1, 2, 3}));
  EXPECT_EQ(r.bytes(0).size(), 0u);
  EXPECT_EQ(r.remaining(), 0u);
  r.expect_end();
}

TEST(RpcWire, ReadingPastTheEndThrowsNamingTheField) {
  const std::vector<uint8_t> seven(7, 0);
  Reader r(seven, "ALLOC_BUFFER");
  expect_invalid([&] { r.u64("size"); }, {"[rpc ALLOC_BUFFER]", "truncated", "size", "8 bytes", "7 left"});
  EXPECT_EQ(r.remaining(), 7u);  // a failed read consumes nothing
  EXPECT_EQ(r.u32(), 0u);
  expect_invalid([&] { r.u32(); }, {"u32", "3 left"});
  Reader empty(std::span<const uint8_t>(), "PING");
  expect_invalid([&] { empty.u8(); }, {"[rpc PING]", "u8"});
  empty.expect_end();
}

TEST(RpcWire, HugeLengthsDoNotWrap) {
  const std::vector<uint8_t> some(16, 0);
  Reader r(some, "SET_TENSOR");
  r.u8();
  expect_invalid([&] { r.bytes(SIZE_MAX, "data"); }, {"data", "15 left"});
  expect_invalid([&] { r.bytes(SIZE_MAX - 14); }, {"bytes"});
  EXPECT_EQ(r.bytes(15).size(), 15u);
}

TEST(RpcWire, StringsAreCappedAndChecked) {
  Writer w;
  w.u32(0xFFFFFFFF);  // a length far beyond the payload
  Reader r(w.data(), "GET_DEVICES");
  expect_invalid([&] { r.str(UINT32_MAX, "name"); }, {"name", "truncated"});
  Reader capped(w.data(), "GET_DEVICES");
  expect_invalid([&] { capped.str(kMaxString, "name"); }, {"name", "4294967295", "cap", "4096"});

  Writer at_cap;
  at_cap.str(std::string(kMaxString, 'x'));
  Reader ok(at_cap.data(), "x");
  EXPECT_EQ(ok.str().size(), kMaxString);
  Writer over;
  expect_invalid([&] { over.str(std::string(kMaxString + 1, 'x')); }, {"4097"});
  EXPECT_TRUE(over.data().empty());
}

TEST(RpcWire, ExpectEndRejectsTrailingBytes) {
  const std::vector<uint8_t> five(5, 0);
  Reader r(five, "PING");
  r.u32();
  expect_invalid([&] { r.expect_end(); }, {"[rpc PING]", "1 unexpected byte"});
  r.u8();
  r.expect_end();
}

TEST(RpcWire, FrameHeaderLayout) {
  FrameHeader h{0x00A1B2C3, static_cast<uint16_t>(Cmd::graph_compute), 0x0102};
  uint8_t bytes[kFrameHeaderBytes];
  encode_header(h, bytes);
  const uint8_t expected[kFrameHeaderBytes] = {0xC3, 0xB2, 0xA1, 0x00, 0x30, 0x00, 0x02, 0x01};
  EXPECT_EQ(std::memcmp(bytes, expected, kFrameHeaderBytes), 0);
  const FrameHeader back = decode_header(bytes);
  EXPECT_EQ(back.length, h.length);
  EXPECT_EQ(back.command, h.command);
  EXPECT_EQ(back.flags, h.flags);
  const uint8_t max[kFrameHeaderBytes] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  EXPECT_EQ(decode_header(max).length, UINT32_MAX);
  EXPECT_EQ(decode_header(max).command, 0xFFFF);
}

TEST(RpcWire, CommandTable) {
  const Cmd with_reply[] = {Cmd::hello,       Cmd::auth,       Cmd::get_devices, Cmd::alloc_buffer,
                            Cmd::supports_op, Cmd::set_tensor_hash, Cmd::get_tensor, Cmd::synchronize,
                            Cmd::event_sync,  Cmd::ping,       Cmd::peer_ticket, Cmd::peer_connect,
                            Cmd::peer_attach, Cmd::compute_stats, Cmd::get_tensor_rows};
  const Cmd without[] = {Cmd::free_buffer,   Cmd::clear_buffer, Cmd::set_tensor,   Cmd::copy_tensor,
                         Cmd::memset_tensor, Cmd::graph_compute, Cmd::event_record, Cmd::event_wait,
                         Cmd::peer_push,     Cmd::push_to_peer,  Cmd::peer_wait,    Cmd::set_tensor_rows};
  for (Cmd c : with_reply) {
    EXPECT_TRUE(is_known(static_cast<uint16_t>(c)));
    EXPECT_TRUE(has_reply(c)) << cmd_name(static_cast<uint16_t>(c));
  }
  for (Cmd c : without) {
    EXPECT_TRUE(is_known(static_cast<uint16_t>(c)));
    EXPECT_FALSE(has_reply(c)) << cmd_name(static_cast<uint16_t>(c));
  }
  EXPECT_TRUE(is_known(0xFFFF));
  EXPECT_FALSE(has_reply(Cmd::error));
  int known = 0;
  for (uint32_t c = 0; c <= 0xFFFF; ++c) known += is_known(static_cast<uint16_t>(c));
  EXPECT_EQ(known, 28);  // 27 requests and ERROR; reply codes are not requests
  EXPECT_STREQ(cmd_name(0x0014), "SUPPORTS_OP");
  EXPECT_STREQ(cmd_name(0x8014), "SUPPORTS_OP reply");
  EXPECT_STREQ(cmd_name(0x8032), "COMPUTE_STATS reply");
  EXPECT_FALSE(is_known(0x8001));
  EXPECT_FALSE(is_known(0));

  EXPECT_EQ(payload_limit(Cmd::set_tensor), 64u << 20);
  EXPECT_EQ(payload_limit(Cmd::peer_push), 64u << 20);
  EXPECT_EQ(payload_limit(Cmd::set_tensor_rows), 64u << 20);
  EXPECT_EQ(payload_limit(Cmd::get_tensor_rows), 16u << 20);
  EXPECT_STREQ(cmd_name(0x0025), "SET_TENSOR_ROWS");
  EXPECT_STREQ(cmd_name(0x8026), "GET_TENSOR_ROWS reply");
  EXPECT_EQ(payload_limit(Cmd::graph_compute), 16u << 20);
  EXPECT_EQ(payload_limit(Cmd::hello), 16u << 20);

  EXPECT_STREQ(cmd_name(0x0030), "GRAPH_COMPUTE");
  EXPECT_STREQ(cmd_name(0x0050 | kReplyBit), "PING reply");
  EXPECT_STREQ(cmd_name(0xFFFF), "ERROR");
  EXPECT_STREQ(cmd_name(0x0012 | kReplyBit), "unknown");  // FREE_BUFFER has no reply
  EXPECT_STREQ(cmd_name(0x1234), "unknown");
}

}  // namespace
}  // namespace weft::rpc
