package imagedec

import "github.com/loaderd/loaderd/loader/internal/loadertest"

// allocsPerRun is loadertest.AllocsPerRun.
var allocsPerRun = loadertest.AllocsPerRun
