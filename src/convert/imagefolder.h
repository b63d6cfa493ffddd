/* The imagefolder driver (imagefolder.c): the engine run once per split of an ImageFolder tree. */
#ifndef GRIST_CONVERT_IMAGEFOLDER_H
#define GRIST_CONVERT_IMAGEFOLDER_H

#include "convert/engine.h"

/* GRIST_CONVERT_IMAGEFOLDER: an ImageFolder tree into a prepared TFDS dataset. */
int grist_convert_imagefolder(struct convert *c);

#endif
