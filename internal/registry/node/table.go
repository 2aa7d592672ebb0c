package node

import (
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

const (
	// labelNodeRolePrefix: every label key "node-role.kubernetes.io/<role>"
	// names a role; the value is ignored.
	labelNodeRolePrefix = "node-role.kubernetes.io/"
	// labelRole: the legacy label whose value is a role.
	labelRole = "kubernetes.io/role"
)

// columns are the server-side printer's node columns. Names are upstream's
// spelling; kubectl upper-cases them for display.
func columns() []metav1.TableColumnDefinition {
	name := metav1.ObjectMeta{}.SwaggerDoc()
	info := v1.NodeSystemInfo{}.SwaggerDoc()
	status := v1.NodeStatus{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: name["name"]},
		{Name: "Status", Type: "string", Description: "The status of the node"},
		{Name: "Roles", Type: "string", Description: "The roles of the node"},
		{Name: "Age", Type: "string", Description: name["creationTimestamp"]},
		{Name: "Version", Type: "string", Description: info["kubeletVersion"]},
		{Name: "Internal-IP", Type: "string", Priority: 1, Description: status["addresses"]},
		{Name: "External-IP", Type: "string", Priority: 1, Description: status["addresses"]},
		{Name: "OS-Image", Type: "string", Priority: 1, Description: info["osImage"]},
		{Name: "Kernel-Version", Type: "string", Priority: 1, Description: info["kernelVersion"]},
		{Name: "Container-Runtime", Type: "string", Priority: 1, Description: info["containerRuntimeVersion"]},
	}
}

// row returns one cell per column, wide ones included.
func row(obj runtime.Object, now time.Time) []interface{} {
	n := obj.(*v1.Node)
	info := n.Status.NodeInfo
	return []interface{}{
		n.Name,
		Status(n),
		Roles(n),
		age(n.CreationTimestamp, now),
		info.KubeletVersion,
		firstAddress(n, v1.NodeInternalIP),
		firstAddress(n, v1.NodeExternalIP),
		orUnknown(info.OSImage),
		orUnknown(info.KernelVersion),
		orUnknown(info.ContainerRuntimeVersion),
	}
}

// Status is the STATUS cell: "Ready" when the Ready condition is True,
// "NotReady" when it is anything else, "Unknown" when there is none; then
// ",SchedulingDisabled" when the node is cordoned. With several Ready
// conditions the last one counts.
func Status(n *v1.Node) string {
	var ready *v1.NodeCondition
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == v1.NodeReady {
			ready = &n.Status.Conditions[i]
		}
	}
	s := "Unknown"
	if ready != nil {
		s = "NotReady"
		if ready.Status == v1.ConditionTrue {
			s = "Ready"
		}
	}
	if n.Spec.Unschedulable {
		s += ",SchedulingDisabled"
	}
	return s
}

// Roles is the ROLES cell: the sorted, comma-joined role names, or
// "<none>".
func Roles(n *v1.Node) string {
	set := map[string]bool{}
	for k, v := range n.Labels {
		switch {
		case strings.HasPrefix(k, labelNodeRolePrefix):
			if role := strings.TrimPrefix(k, labelNodeRolePrefix); role != "" {
				set[role] = true
			}
		case k == labelRole && v != "":
			set[v] = true
		}
	}
	if len(set) == 0 {
		return "<none>"
	}
	roles := make([]string, 0, len(set))
	for r := range set {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	return strings.Join(roles, ",")
}

func firstAddress(n *v1.Node, t v1.NodeAddressType) string {
	for _, a := range n.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return "<none>"
}

func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}

// age is the AGE cell: the time since t, or "<unknown>" when t is unset.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
