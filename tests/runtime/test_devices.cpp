// Device specs: the one parser (include/weft/runtime/devices.h).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/rpc/worker.h"
#include "weft/runtime/devices.h"

namespace {

using weft::DeviceSpec;
using weft::DeviceSpecKind;

// The message of the Error that f throws (fails the test when none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

TEST(DeviceSpec, ParsesEveryForm) {
  DeviceSpec d = weft::parse_device_spec("cpu");
  EXPECT_EQ(d.kind, DeviceSpecKind::cpu);
  EXPECT_EQ(d.threads, 0);
  EXPECT_EQ(d.label(), "host");
  d = weft::parse_device_spec(" cpu:12 ");
  EXPECT_EQ(d.kind, DeviceSpecKind::cpu);
  EXPECT_EQ(d.threads, 12);
  EXPECT_EQ(d.text, "cpu:12");
  d = weft::parse_device_spec("rpc://10.0.0.2:50052");
  EXPECT_EQ(d.kind, DeviceSpecKind::rpc);
  EXPECT_EQ(d.endpoint, "10.0.0.2:50052");
  EXPECT_EQ(d.index, 0);
  EXPECT_EQ(d.label(), "10.0.0.2:50052");
  d = weft::parse_device_spec("rpc://[::1]:7/3");
  EXPECT_EQ(d.endpoint, "[::1]:7");
  EXPECT_EQ(d.index, 3);
  EXPECT_EQ(d.label(), "[::1]:7/3");
  EXPECT_EQ(weft::parse_device_spec("async").kind, DeviceSpecKind::async);
  EXPECT_EQ(weft::parse_device_spec("async-copy").kind, DeviceSpecKind::async_copy);
  d = weft::worker_device_spec("192.168.1.7:50052");
  EXPECT_EQ(d.kind, DeviceSpecKind::rpc);
  EXPECT_EQ(d.text, "rpc://192.168.1.7:50052");
}

TEST(DeviceSpec, ListsSplitOnCommas) {
  const std::vector<DeviceSpec> v = weft::parse_device_specs("cpu:2, rpc://h:1/1 ,async-copy");
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].threads, 2);
  EXPECT_EQ(v[1].endpoint, "h:1");
  EXPECT_EQ(v[1].index, 1);
  EXPECT_EQ(v[2].kind, DeviceSpecKind::async_copy);
}

TEST(DeviceSpec, BadSpecsAreNamed) {
  EXPECT_NE(error_of([] { weft::parse_device_spec("gpu"); }).find("unknown device spec 'gpu' (known: cpu"),
            std::string::npos);
  EXPECT_NE(error_of([] { weft::parse_device_spec("cpu:0"); }).find("'0' is not a thread count"), std::string::npos);
  EXPECT_NE(error_of([] { weft::parse_device_spec("cpu:4x"); }).find("'4x'"), std::string::npos);
  EXPECT_NE(error_of([] { weft::parse_device_spec("cpu:99999"); }).find("thread count"), std::string::npos);
  EXPECT_NE(error_of([] { weft::parse_device_spec("rpc://host"); }).find("'host' is not HOST:PORT"),
            std::string::npos);
  EXPECT_NE(error_of([] { weft::parse_device_spec("rpc://h:70000"); }).find("'70000' is not a port"),
            std::string::npos);
  EXPECT_NE(error_of([] { weft::parse_device_spec("rpc://h:0"); }).find("is not a port"), std::string::npos);
  EXPECT_NE(error_of([] { weft::parse_device_spec("rpc://h:1/64"); }).find("'64' is not a device index"),
            std::string::npos);
  EXPECT_NE(error_of([] { weft::parse_device_spec("rpc://h:1/"); }).find("device index"), std::string::npos);
  EXPECT_NE(error_of([] { weft::parse_device_spec("rpc://[::1:5"); }).find("IPv6"), std::string::npos);
  EXPECT_NE(error_of([] { weft::parse_device_specs("cpu,,async"); }).find("empty device spec"), std::string::npos);
  EXPECT_NE(error_of([] { weft::parse_device_specs(""); }).find("empty device spec"), std::string::npos);
}

TEST(DeviceSpec, OpensLocalAndRemoteDevices) {
  auto cpu = weft::open_device(weft::parse_device_spec("cpu:1"));
  EXPECT_EQ(cpu->kind(), weft::DeviceKind::cpu);
  auto async = weft::open_device(weft::parse_device_spec("async-copy"));
  EXPECT_FALSE(async->default_buffer_type().is_host());  // memory of its own

  // A worker serving two devices: /1 is the second, /2 does not exist.
  auto a = weft::make_cpu_device(1), b = weft::make_cpu_device(1);
  weft::rpc::WorkerOptions o;
  o.log = false;
  weft::rpc::Worker worker({a.get(), b.get()}, o);
  worker.start();
  const std::string endpoint = "127.0.0.1:" + std::to_string(worker.port());
  auto remote = weft::open_device(weft::parse_device_spec("rpc://" + endpoint + "/1"));
  EXPECT_EQ(remote->kind(), weft::DeviceKind::remote);
  EXPECT_NE(error_of([&] { weft::open_device(weft::parse_device_spec("rpc://" + endpoint + "/2")); })
                .find("the worker serves 2 devices"),
            std::string::npos);
}

// A workers file: one worker per line, comments and blank lines skipped,
// each once, in order; a bad line named by file and line number.
TEST(WorkersFile, ParsesWorkersCommentsAndBlankLines) {
  const std::string text =
      "# the pool\n"
      "10.0.0.2:50052\n"
      "\n"
      "   10.0.0.3:50052   # the desk box\n"
      "10.0.0.2:50052\n"
      "tls://10.0.0.4:50052\r\n"
      "rpc://10.0.0.5:50052/1";
  const std::vector<DeviceSpec> w = weft::parse_workers_file(text, "pool.txt");
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[0].endpoint, "10.0.0.2:50052");
  EXPECT_EQ(w[1].endpoint, "10.0.0.3:50052");
  EXPECT_EQ(w[2].kind, DeviceSpecKind::rpc);
  EXPECT_EQ(w[2].endpoint, "tls://10.0.0.4:50052");
  EXPECT_EQ(w[3].index, 1);
  EXPECT_TRUE(weft::parse_workers_file("# nobody yet\n\n", "empty.txt").empty());
}

TEST(WorkersFile, BadEntriesAreNamedByLine) {
  const auto message = [](const std::string& text) {
    try {
      (void)weft::parse_workers_file(text, "pool.txt");
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("10.0.0.2:50052\n10.0.0.3\n").find("pool.txt:2"), std::string::npos) << message("10.0.0.2:50052\n10.0.0.3\n");
  EXPECT_NE(message("# x\nasync\n").find("pool.txt:2"), std::string::npos) << message("# x\nasync\n");
  std::string many;
  for (size_t i = 0; i <= weft::kMaxWorkersInFile; ++i) many += "10.0.1." + std::to_string(i % 250) + ":" + std::to_string(1000 + i) + "\n";
  EXPECT_NE(message(many).find("more than 256 workers"), std::string::npos) << message(many);
  EXPECT_NE(message(std::string(weft::kMaxWorkersFileBytes + 1, '#')).find("at most"), std::string::npos);
  try {
    (void)weft::read_workers_file("/nonexistent/weft-workers.txt");
    ADD_FAILURE() << "a missing file was read";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/weft-workers.txt"), std::string::npos) << e.what();
  }
}

}  // namespace
