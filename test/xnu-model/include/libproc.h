// XNU's <libproc.h>, as the model answers it (test/xnu-model/xnu.h).
#pragma once
#include "../xnu.h"
