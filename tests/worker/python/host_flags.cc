// A host process's own gflags, for core_test's import of r2sp._core into a process that defines
// --lr (as a training program with its own flags would): loaded before the extension, its flag
// must keep its value whatever the worker's options say.
#include "gflags/gflags.h"

DEFINE_double(lr, 0.125, "the host program's learning rate");

extern "C" double HostLearningRate() { return FLAGS_lr; }
