// Every indexing op in one include: index_select, gather, where, masked_fill, nonzero.
#pragma once

#include "ops/indexing/gather.h"
#include "ops/indexing/index_select.h"
#include "ops/indexing/nonzero.h"
#include "ops/indexing/where.h"
