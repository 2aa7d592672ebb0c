package cri

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// dockerConfigEntry is one registry's credentials in a docker config.
type dockerConfigEntry struct {
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	Auth          string `json:"auth,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
	RegistryToken string `json:"registrytoken,omitempty"`
}

// Credentials are the credentials in pull secrets that apply to image,
// for Config.PullCredentials: the entries of kubernetes.io/dockerconfigjson
// (.dockerconfigjson's "auths") and kubernetes.io/dockercfg (.dockercfg)
// secrets whose registry key matches the image, the most specific key
// first, then in the secrets' order. Secrets of other types are ignored.
//
// Matching is upstream's credential keyring in simple form: a key
// ("https://registry:5000/some/path/" and the like; its scheme and
// trailing slashes are ignored) matches an image whose registry host and
// port are exactly the key's and whose repository is the key's path or
// below it (no path: the whole registry). Images without a registry are
// Docker Hub's ("docker.io"), which the keys docker.io, index.docker.io
// (with or without /v1/) and registry-1.docker.io all name. Wildcards are
// not supported.
//
// The error names the secrets that could not be read; the credentials of
// the others are returned with it.
func Credentials(image string, secrets []corev1.Secret) ([]*runtimeapi.AuthConfig, error) {
	host, repo := splitImage(image)
	type match struct {
		pathLen int
		auth    *runtimeapi.AuthConfig
	}
	var matches []match
	var errs []error
	for _, s := range secrets {
		entries, err := secretEntries(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("pull secret %s/%s: %w", s.Namespace, s.Name, err))
			continue
		}
		keys := make([]string, 0, len(entries))
		for k := range entries {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			kHost, kPath := splitKey(k)
			if kHost != host || (kPath != "" && repo != kPath && !strings.HasPrefix(repo, kPath+"/")) {
				continue
			}
			auth, err := authConfig(kHost, entries[k])
			if err != nil {
				errs = append(errs, fmt.Errorf("pull secret %s/%s, registry %q: %w", s.Namespace, s.Name, k, err))
				continue
			}
			matches = append(matches, match{pathLen: len(kPath), auth: auth})
		}
	}
	slices.SortStableFunc(matches, func(a, b match) int { return cmp.Compare(b.pathLen, a.pathLen) })
	out := make([]*runtimeapi.AuthConfig, 0, len(matches))
	for _, m := range matches {
		out = append(out, m.auth)
	}
	return out, errors.Join(errs...)
}

// secretEntries are the registry entries of a docker config secret; nil
// for a secret of another type.
func secretEntries(s corev1.Secret) (map[string]dockerConfigEntry, error) {
	switch s.Type {
	case corev1.SecretTypeDockerConfigJson:
		data, ok := s.Data[corev1.DockerConfigJsonKey]
		if !ok {
			return nil, fmt.Errorf("no %s key", corev1.DockerConfigJsonKey)
		}
		var cfg struct {
			Auths map[string]dockerConfigEntry `json:"auths"`
		}
		if err := json.Unmarshal(data, &cfg); err != nil {
			return nil, fmt.Errorf("%s: %w", corev1.DockerConfigJsonKey, err)
		}
		return cfg.Auths, nil
	case corev1.SecretTypeDockercfg:
		data, ok := s.Data[corev1.DockerConfigKey]
		if !ok {
			return nil, fmt.Errorf("no %s key", corev1.DockerConfigKey)
		}
		var cfg map[string]dockerConfigEntry
		if err := json.Unmarshal(data, &cfg); err != nil {
			return nil, fmt.Errorf("%s: %w", corev1.DockerConfigKey, err)
		}
		return cfg, nil
	}
	return nil, nil
}

// authConfig is an entry as CRI credentials; "auth" (base64 of
// "user:password") fills a missing username and password.
func authConfig(host string, e dockerConfigEntry) (*runtimeapi.AuthConfig, error) {
	a := &runtimeapi.AuthConfig{
		Username:      e.Username,
		Password:      e.Password,
		ServerAddress: host,
		IdentityToken: e.IdentityToken,
		RegistryToken: e.RegistryToken,
	}
	if e.Auth != "" && a.Username == "" && a.Password == "" {
		raw, err := base64.StdEncoding.DecodeString(e.Auth)
		if err != nil {
			return nil, fmt.Errorf("auth: %w", err)
		}
		user, pass, ok := strings.Cut(string(raw), ":")
		if !ok {
			return nil, errors.New(`auth: not base64 of "user:password"`)
		}
		a.Username, a.Password = user, pass
	}
	return a, nil
}

// dockerHub is the canonical name of Docker Hub's registry.
const dockerHub = "docker.io"

// canonicalHost folds Docker Hub's names into dockerHub.
func canonicalHost(host string) string {
	host = strings.ToLower(host)
	switch host {
	case "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com":
		return dockerHub
	}
	return host
}

// splitImage is an image reference's registry host[:port] and repository
// path (without tag or digest); an image without a registry is Docker
// Hub's, under library/ when it has one path component.
func splitImage(image string) (host, repo string) {
	name, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name = name[:i]
	}
	first, rest, ok := strings.Cut(name, "/")
	if !ok || (!strings.ContainsAny(first, ".:") && first != "localhost") {
		if !strings.Contains(name, "/") {
			name = "library/" + name
		}
		return dockerHub, name
	}
	return canonicalHost(first), rest
}

// splitKey is a docker config key's registry host[:port] and path.
func splitKey(key string) (host, path string) {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	key = strings.Trim(key, "/")
	host, path, _ = strings.Cut(key, "/")
	host = canonicalHost(host)
	if host == dockerHub && (path == "v1" || path == "v2") {
		path = ""
	}
	return host, path
}
