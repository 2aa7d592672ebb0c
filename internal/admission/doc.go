// Package admission is the home of knode's admission plugins; each lives in
// its own subpackage and implements apiserver.Admitter.
//
// The API server runs admission on every write (create, update, patch,
// delete, and each object of a deletecollection), after authorization has
// allowed the request, after decoding and defaulting and after the Kind's
// own preparation (for example the status subresource keeping the stored
// spec), and before validation and storage. Plugins run in the order of
// apiserver.Config.Admission; the first error ends the request and is sent
// to the client as its Status, so plugins return apimachinery api/errors
// (403 Forbidden for a refusal). Dry-run requests are admitted like real
// ones.
//
// Plugins:
//   - noderestriction: upstream's NodeRestriction; limits node identities
//     to their own Node, Lease, pods and CSINode, to the status of their
//     pods' claims (expansion fields only), and to the kubelet label
//     allow-list. It pairs with auth.NodeAuthorizer.
//   - defaulttolerationseconds: gives pods the not-ready and unreachable
//     NoExecute tolerations (300 s by default) unless they tolerate them.
//   - priority: resolves priorityClassName into spec.priority.
//   - defaultstorageclass: upstream's DefaultStorageClass; a claim created
//     without a class gets the newest default StorageClass.
//   - storageprotection: upstream's StorageObjectInUseProtection; adds the
//     pvc-protection and pv-protection finalizers on create.
//
// This package has no code; it documents the chain.
package admission
