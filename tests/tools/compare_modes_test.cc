// tools/compare_modes on loopback with tiny settings: it runs every mode and produces the
// table, the three plots and the RESULT line. Each plot is decoded: its size is the figure's,
// and it shows its series in matplotlib's colours, one per mode or worker, and no more.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/child_process.h"
#include "tests/testing/png.h"

namespace r2sp {
namespace {

// The plot at `path` is `width` x `height` pixels and shows the first `series` colours of
// matplotlib's cycle, and not the next one.
void ExpectPlot(const std::string& path, int width, int height, int series) {
  SCOPED_TRACE(path);
  absl::StatusOr<testing::PngImage> image = testing::DecodePng(testing::ReadFile(path));
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->width, width);
  EXPECT_EQ(image->height, height);
  for (int i = 0; i < series; ++i) {
    EXPECT_GT(image->Count(testing::kMatplotlibColors[i]), 20) << "series C" << i;
  }
  EXPECT_EQ(image->Count(testing::kMatplotlibColors[series]), 0) << "series C" << series;
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
  for (const char* mode :
       {"| bsp |", "| ssp |", "| asp |", "| r2sp |", "| r2sp_hetero |", "| r2sp_auto |",
        "| easgd |", "| eawild |", "| eawild_hetero |"}) {
    EXPECT_NE(table.find(mode), std::string::npos) << table;
  }
  EXPECT_NE(table.find("0 of 60 |"), std::string::npos)
      << "r2sp pushes must not overlap\n" << table;
  // The launcher measured each process's CPU use and the machine's.
  EXPECT_NE(table.find("| servers' CPU (cores) |"), std::string::npos) << table;
  const std::string summary = testing::ReadFile(dir + "/out/bsp/summary.json");
  for (const char* key : {"\"cpu_cores\"", "\"server0\"", "\"worker1\"", "\"scheduler\"",
                          "\"machine_busy_cores\""}) {
    EXPECT_NE(summary.find(key), std::string::npos) << key << "\n" << summary;
  }
  // tools/pylib/mode_plots.py's figures at 110 dpi: accuracy 7 x 4.5 in, a line per mode;
  // pushes 12 x 3.5 in (bsp beside r2sp), a colour per worker; link 7 x 4 in, a line per mode.
  ExpectPlot(dir + "/out/accuracy.png", 770, 495, 9);
  ExpectPlot(dir + "/out/pushes.png", 1320, 385, 2);
  ExpectPlot(dir + "/out/link.png", 770, 440, 9);
}

// --repeats: every mode runs twice, interleaved, each in its own directory; the table gives
// median (min-max) per figure, the JSON every run, the RESULT line the median ratios. Then
// tools/run_report reads one of the run directories.
TEST(CompareModesTest, RepeatsRunEveryModeAndReportMediansAndRanges) {
  const std::string dir = testing::MakeTempDir("compare_modes_repeats");
  testing::ChildProcess run({"/usr/bin/python3", "tools/compare_modes", "--bin_dir=.",
                             "--out=" + dir + "/out", "--workers=2", "--repeats=2",
                             "--modes=bsp,r2sp_hetero", "--global_batch=64",
                             "--worker_flags=--model=mlp --max_steps=20 --threads=1",
                             "--target_accuracy=0.5", "--timeout=120"},
                            dir + "/log");
  ASSERT_EQ(run.Wait(absl::Seconds(300)), 0) << run.Log();
  const std::string log = run.Log();
  // The rounds interleave: bsp, hetero, bsp, hetero.
  const size_t b1 = log.find("compare_modes: bsp_run1"), h1 = log.find("r2sp_hetero_run1"),
               b2 = log.find("compare_modes: bsp_run2"), h2 = log.find("r2sp_hetero_run2");
  ASSERT_NE(h2, std::string::npos) << log;
  EXPECT_TRUE(b1 < h1 && h1 < b2 && b2 < h2) << log;
  EXPECT_NE(log.find("RESULT r2sp_hetero_vs_bsp_throughput="), std::string::npos) << log;
  EXPECT_NE(log.find("r2sp_hetero_vs_bsp_job_throughput="), std::string::npos) << log;
  for (const char* run_dir : {"bsp_run1", "bsp_run2", "r2sp_hetero_run1", "r2sp_hetero_run2"}) {
    EXPECT_NE(testing::ReadFile(dir + "/out/" + run_dir + "/summary.json"), "") << run_dir;
  }
  const std::string table = testing::ReadFile(dir + "/out/results.md");
  EXPECT_NE(table.find("Each mode ran 2 times"), std::string::npos) << table;
  EXPECT_NE(table.find("| vs bsp (job) |"), std::string::npos) << table;
  // bsp's own ratio is 1.00 in both rounds: median and range.
  EXPECT_NE(table.find("1.00 (1.00-1.00)"), std::string::npos) << table;
  EXPECT_NE(table.find("0 (0-0) of 40 |"), std::string::npos)
      << "r2sp pushes must not overlap in either run\n" << table;
  const std::string json = testing::ReadFile(dir + "/out/results.json");
  size_t runs = 0;
  for (size_t at = json.find("\"job_samples_per_s\""); at != std::string::npos;
       at = json.find("\"job_samples_per_s\"", at + 1)) {
    ++runs;
  }
  EXPECT_EQ(runs, 4u) << json;  // 2 rounds x 2 modes

  // tools/run_report on one of the runs: each worker's phases, the slot analysis, the CPU use.
  testing::ChildProcess report({"/usr/bin/python3", "tools/run_report",
                                dir + "/out/r2sp_hetero_run1"},
                               dir + "/report");
  ASSERT_EQ(report.Wait(absl::Seconds(60)), 0) << report.Log();
  const std::string text = report.Log();
  for (const char* line : {"worker  0,     20 iterations:", "worker  1,     20 iterations:",
                           "r2sp slot: ", "% of it while another worker pushed",
                           "CPU cores used: ", "machine busy: "}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  testing::ChildProcess empty({"/usr/bin/python3", "tools/run_report", dir}, dir + "/empty");
  EXPECT_EQ(empty.Wait(absl::Seconds(60)), 1);
  EXPECT_NE(empty.Log().find("no metrics_workerN.jsonl"), std::string::npos) << empty.Log();
}

}  // namespace
}  // namespace r2sp
