#include "cuda/device_probe.h"

#include <gtest/gtest.h>

#include <regex>

namespace specd::cuda {
namespace {

TEST(CudaProbeTest, NeverThrowsAndExplainsAMissingDevice) {
  ProbeResult p;
  EXPECT_NO_THROW(p = ProbeDevices());
  EXPECT_EQ(p.device_count(), static_cast<int>(p.devices.size()));
  if (p.device_count() == 0) {
    EXPECT_FALSE(p.reason.empty());
  } else {
    EXPECT_TRUE(p.reason.empty()) << p.reason;
  }
  // Calling again gives the same answer (no sticky error from the first call).
  const ProbeResult again = ProbeDevices();
  EXPECT_EQ(again.device_count(), p.device_count());
  EXPECT_EQ(again.reason, p.reason);
  std::printf("%s", DescribeProbe(p).c_str());
}

TEST(CudaProbeTest, BuiltStatusMatchesTheBuildOption) {
  const ProbeResult p = ProbeDevices();
  EXPECT_EQ(BuiltWithCuda(), SPECD_CUDA_BUILT != 0);
  EXPECT_EQ(p.built, SPECD_CUDA_BUILT != 0);
  if (p.built) {
    EXPECT_TRUE(std::regex_match(p.toolkit, std::regex("[0-9]+\\.[0-9]+"))) << p.toolkit;
    EXPECT_GT(p.runtime_version, 0);
    EXPECT_FALSE(p.architectures.empty());
  } else {
    EXPECT_EQ(p.reason, "built without CUDA (SPECD_CUDA=OFF or no nvcc at configure time)");
    EXPECT_TRUE(p.devices.empty());
    EXPECT_EQ(p.driver_version, 0);
  }
}

TEST(CudaProbeTest, DevicesReportTheirProperties) {
  const ProbeResult p = ProbeDevices();
  if (p.devices.empty()) GTEST_SKIP() << "no CUDA device: " << p.reason;
  for (const DeviceInfo& d : p.devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GE(d.cc_major, 3) << d.name;
    EXPECT_GT(d.total_memory_bytes, 0u) << d.name;
    EXPECT_GT(d.sm_count, 0) << d.name;
    EXPECT_GT(d.PeakMemoryBandwidth(), 0.0) << d.name << ": memory clock " << d.memory_clock_khz
                                            << " kHz, bus " << d.memory_bus_width_bits << " bits";
    EXPECT_EQ(d.Arch(), "sm_" + std::to_string(d.cc_major * 10 + d.cc_minor));
  }
}

TEST(CudaProbeTest, VersionStrings) {
  EXPECT_EQ(CudaVersionString(13000), "13.0");
  EXPECT_EQ(CudaVersionString(12080), "12.8");
  EXPECT_EQ(CudaVersionString(11020), "11.2");
  EXPECT_EQ(CudaVersionString(0), "none");
}

TEST(CudaProbeTest, PeakMemoryBandwidthFromClockAndBusWidth) {
  DeviceInfo d;
  EXPECT_EQ(d.PeakMemoryBandwidth(), 0.0);
  d.memory_clock_khz = 2619000;  // H100 SXM: HBM3 at 2.619 GHz on a 5120-bit bus
  d.memory_bus_width_bits = 5120;
  EXPECT_NEAR(d.PeakMemoryBandwidth(), 3.352e12, 1e9);
}

TEST(CudaProbeTest, DescriptionNamesTheReasonWhenThereIsNoDevice) {
  ProbeResult p;
  p.built = true;
  p.toolkit = "13.0";
  p.architectures = "80,90";
  p.runtime_version = 13000;
  p.reason = "CUDA driver not found: libcuda.so.1 not loadable (test)";
  const std::string s = DescribeProbe(p);
  EXPECT_NE(s.find("toolkit 13.0"), std::string::npos) << s;
  EXPECT_NE(s.find("driver none"), std::string::npos) << s;
  EXPECT_NE(s.find("devices: 0"), std::string::npos) << s;
  EXPECT_NE(s.find(p.reason), std::string::npos) << s;
}

}  // namespace
}  // namespace specd::cuda
