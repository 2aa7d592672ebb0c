package volumes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// checkHostPath applies a hostPath volume's type, with upstream's rules and
// messages: the path may not step back (".."); no type (or "") checks
// nothing; DirectoryOrCreate and FileOrCreate create a missing path (a
// directory with mode 0755, an empty file with mode 0644) and otherwise
// check it as Directory and File do; the other types require the path to
// exist and be of that type.
func checkHostPath(path string, typ *corev1.HostPathType) error {
	for _, part := range strings.Split(filepath.ToSlash(path), "/") {
		if part == ".." {
			return fmt.Errorf("invalid HostPath `%s`: must not contain '..'", path)
		}
	}
	if typ == nil || *typ == corev1.HostPathUnset {
		return nil
	}
	switch *typ {
	case corev1.HostPathDirectoryOrCreate:
		if !exists(path) {
			if err := os.MkdirAll(path, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			return nil
		}
		return typeMatches(path, corev1.HostPathDirectory, "directory")
	case corev1.HostPathDirectory:
		return typeMatches(path, corev1.HostPathDirectory, "directory")
	case corev1.HostPathFileOrCreate:
		if !exists(path) {
			f, err := os.OpenFile(path, os.O_CREATE, 0o644)
			if f != nil {
				_ = f.Close()
			}
			if err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			return nil
		}
		return typeMatches(path, corev1.HostPathFile, "file")
	case corev1.HostPathFile:
		return typeMatches(path, corev1.HostPathFile, "file")
	case corev1.HostPathSocket:
		return typeMatches(path, corev1.HostPathSocket, "socket file")
	case corev1.HostPathCharDev:
		return typeMatches(path, corev1.HostPathCharDev, "character device")
	case corev1.HostPathBlockDev:
		return typeMatches(path, corev1.HostPathBlockDev, "block device")
	}
	return fmt.Errorf("%s is an invalid volume type", *typ)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func typeMatches(path string, want corev1.HostPathType, description string) error {
	if !exists(path) {
		return fmt.Errorf("hostPath %s doesn't exist", path)
	}
	have, err := fileType(path)
	if err != nil {
		return fmt.Errorf("hostPath type check failed, %s is not a %s, unable to determine its type: %w", path, description, err)
	}
	if have != want {
		return fmt.Errorf("hostPath type check failed: %s is not a %s, it's a %s", path, description, have)
	}
	return nil
}

// fileType is the hostPath type of what is at path, following symlinks.
func fileType(path string) (corev1.HostPathType, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	mode := info.Mode()
	switch {
	case mode.IsDir():
		return corev1.HostPathDirectory, nil
	case mode.IsRegular():
		return corev1.HostPathFile, nil
	case mode&fs.ModeSocket != 0:
		return corev1.HostPathSocket, nil
	case mode&fs.ModeCharDevice != 0:
		return corev1.HostPathCharDev, nil
	case mode&fs.ModeDevice != 0:
		return corev1.HostPathBlockDev, nil
	}
	return "", errors.New("only recognise file, directory, socket, block device and character device")
}
