//go:build !cgo

package devices

const nvmlCompiled = false

// probe cannot reach NVML without cgo.
func probe() (string, []GPU, error) { return "", nil, ErrNoCgo }
