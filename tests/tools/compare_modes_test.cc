// tools/compare_modes on loopback with tiny settings: it runs every mode and produces the
// table, the three plots and the RESULT line.
#include <sys/stat.h>

#include <string>

#include "gtest/gtest.h"
#include "tests/testing/child_process.h"

namespace r2sp {
namespace {

bool NonEmpty(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && st.st_size > 1000;
}

TEST(CompareModesTest, TinyLoopbackRunProducesTablePlotsAndResult) {
  const std::string dir = testing::MakeTempDir("compare_modes");
  testing::ChildProcess run({"/usr/bin/python3", "tools/compare_modes", "--bin_dir=.",
                             "--out=" + dir + "/out", "--workers=2",
                             "--worker_flags=--model=mlp --max_steps=30 --threads=1",
                             "--target_accuracy=0.5", "--timeout=120"},
                            dir + "/log");
  ASSERT_EQ(run.Wait(absl::Seconds(300)), 0) << run.Log();
  const std::string log = run.Log();
  EXPECT_NE(log.find("RESULT ssp_vs_bsp_throughput="), std::string::npos) << log;
  EXPECT_NE(log.find("r2sp_vs_bsp_throughput="), std::string::npos) << log;
  EXPECT_NE(log.find("r2sp_hetero_vs_bsp_throughput="), std::string::npos) << log;
  EXPECT_NE(log.find("r2sp_vs_bsp_job_throughput="), std::string::npos) << log;
  const std::string table = testing::ReadFile(dir + "/out/results.md");
  EXPECT_NE(table.find("| job samples/s |"), std::string::npos) << table;
  for (const char* mode : {"| bsp |", "| ssp |", "| asp |", "| r2sp |", "| r2sp_hetero |"}) {
    EXPECT_NE(table.find(mode), std::string::npos) << table;
  }
  EXPECT_NE(table.find("0 of 60 |"), std::string::npos) << "r2sp pushes must not overlap\n" << table;
  for (const char* png : {"accuracy.png", "pushes.png", "link.png"}) {
    EXPECT_TRUE(NonEmpty(dir + "/out/" + png)) << png;
  }
}

}  // namespace
}  // namespace r2sp
