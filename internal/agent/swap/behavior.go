package swap

import "fmt"

// The values of memorySwap.swapBehavior. The empty string means NoSwap.
// UnlimitedSwap was removed in 1.30 and is refused.
const (
	NoSwap      = "NoSwap"
	LimitedSwap = "LimitedSwap"
)

// ValidateBehavior checks memorySwap.swapBehavior with upstream's rule and
// message: it must be "", NoSwap or LimitedSwap.
func ValidateBehavior(b string) error {
	switch b {
	case "", NoSwap, LimitedSwap:
		return nil
	}
	return fmt.Errorf("invalid configuration: memorySwap.swapBehavior %q must be one of: \"\", %q or %q", b, LimitedSwap, NoSwap)
}
