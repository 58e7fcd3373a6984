package nn

import (
	"errors"
	"fmt"
)

var (
	// ErrShape reports a tensor whose shape does not fit a layer.
	ErrShape = errors.New("nn: shape mismatch")
	// ErrState reports a call out of order (Backward before Forward, …).
	ErrState = errors.New("nn: bad call order")
	// ErrCheckpoint reports a checkpoint that is corrupt or does not match.
	ErrCheckpoint = errors.New("nn: bad checkpoint")
)

func shapeErr(layer, format string, a ...any) error {
	return fmt.Errorf("nn: %s: %s: %w", layer, fmt.Sprintf(format, a...), ErrShape)
}
