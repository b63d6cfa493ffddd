/* The loader set-up that the features tests share: a features map over one dataset. */
#ifndef GRIST_TESTS_FEATURES_LOADER_H
#define GRIST_TESTS_FEATURES_LOADER_H

#include "grist/features.h"
#include "grist/loader.h"

/*
 * @cfg (initialised with its .size) set to read the one dataset @ds into rows of @f decoded
 * by @d, as grist_features_map() asks (fixed layout, row bytes, map id): seed 42, 2 epochs,
 * @batch_size rows a batch, @threads threads. The caller sets anything else (the engine).
 */
static inline void t_features_loader_config(struct grist_loader_config *cfg, struct grist_dataset_spec *ds,
					    const struct grist_features *f, struct grist_features_decoder *d,
					    size_t batch_size, unsigned threads)
{
	cfg->datasets = ds;
	cfg->num_datasets = 1;
	cfg->seed = 42;
	cfg->epochs = 2;
	cfg->batch_size = batch_size;
	cfg->layout = GRIST_LAYOUT_FIXED;
	cfg->record_bytes = grist_features_row_bytes(f);
	cfg->map = grist_features_map;
	cfg->map_ctx = d;
	cfg->map_id = grist_features_id(f);
	cfg->threads = threads;
}

#endif
