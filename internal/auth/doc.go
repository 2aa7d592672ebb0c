// Package auth owns knode's identity and access: the cluster CA and the
// certificates it signs, kubeconfigs that carry them, authentication of HTTP
// requests (client certificates and a static token file), authorization
// decisions, and the translation of a request URL into the attributes those
// decisions are made on.
//
// What callers must do:
//   - Call EnsurePKI once at start-up with the data directory; it creates
//     the CA, the serving certificate, the admin credentials and the API
//     server's client credentials towards node agents on first use and
//     loads them afterwards. Serve with PKI.TLSConfig.
//   - For every request: RequestAttributes, then an Authenticator (no user
//     and no error means 401 unless PublicPath allows anonymous access; an
//     error means 401), then an Authorizer. Anything but Allow is refused
//     with 403 and the message from Forbidden or ForbiddenError.
//   - When the request carries Impersonate-* headers, call Impersonate
//     (impersonate.go) after authentication: it authorizes the
//     "impersonate" verb on each user, group and uid asked for, with
//     upstream's 403 and 400 messages, and returns the user the request
//     then acts as. Impersonate-Extra-* values are authorized but not
//     carried on, because User has no extra fields.
//
// What it deliberately does not do:
//   - It writes no HTTP responses; the API server turns outcomes into
//     metav1.Status replies.
//   - There is no RBAC and no anonymous user: identities outside
//     system:masters get NoOpinion here, which the API server refuses,
//     except node identities, which NodeAuthorizer (node.go, section 13 of
//     the reference) judges, and discovery paths, which
//     DiscoveryAuthorizer opens to every authenticated user when it is in
//     the chain. NodeAuthorizer plugs into Chain and needs NodeRestriction
//     admission (internal/admission/noderestriction) to narrow the writes
//     it allows.
//   - Certificates are never revoked and files are not watched: a change on
//     disk takes effect at the next EnsurePKI or LoadTokenFile.
package auth
