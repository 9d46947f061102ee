// Every indexing op in one include: index_select, gather, where, masked_fill.
#pragma once

#include "ops/indexing/gather.h"
#include "ops/indexing/index_select.h"
#include "ops/indexing/where.h"
