package main

// The dataset formats loaderd ships: each registers itself with
// loader.RegisterFormat when imported, and is then what serve, bench,
// convert and inspect accept as FORMAT:PATH. This file is the one list.
import (
	_ "github.com/loaderd/loaderd/loader/format/arrow"
	_ "github.com/loaderd/loaderd/loader/format/cifar"
	_ "github.com/loaderd/loaderd/loader/format/folder"
	_ "github.com/loaderd/loaderd/loader/format/parquet"
	_ "github.com/loaderd/loaderd/loader/format/synthetic"
	_ "github.com/loaderd/loaderd/loader/format/tar"
)
