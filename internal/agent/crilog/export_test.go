package crilog

// SetReadBlock makes findTail read n bytes at a time until the test ends.
func SetReadBlock(n int64) (restore func()) {
	old := readBlock
	readBlock = n
	return func() { readBlock = old }
}
