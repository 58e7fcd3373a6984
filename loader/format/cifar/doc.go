// Package cifar implements the CIFAR-10 and CIFAR-100 binary formats as
// loader sources, registered as
//
//	cifar:PATH             CIFAR-10, or CIFAR-100 with its 100 fine labels
//	cifar100-coarse:PATH   CIFAR-100 with its 20 coarse labels
//
// PATH is one batch file, or a directory holding data_batch_N.bin
// (CIFAR-10) or train.bin (CIFAR-100); the two are told apart by record
// size. Class names come from batches.meta.txt (or CIFAR-100's
// fine_label_names.txt, coarse_label_names.txt) beside the data, else
// CIFAR-10's names or the label numbers. Files are mapped read-only and a
// sample's pixels (32×32×3 U8, CHW as stored) are a view of the mapping:
// no copy.
//
// Import it for its side effect, as image/png is imported, to make the
// formats known to loader.Open. Its sources are safe for concurrent use and
// implement loader.Namer.
package cifar
