#include "stats.h"

struct hk_counters hk_ctr;
