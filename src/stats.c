#include "stats.h"

struct hk_counters hk_ctr;
int hk_counting;
