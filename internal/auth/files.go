package auth

import "os"

// File modes for what this package writes.
const (
	keyFileMode  os.FileMode = 0o600
	certFileMode os.FileMode = 0o644
	dirMode      os.FileMode = 0o700
)
