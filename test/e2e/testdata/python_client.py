"""Drive knode with the official Kubernetes Python client.

Usage: python_client.py KUBECONFIG NODE

Loads the admin kubeconfig, lists nodes, patches NODE's labels with a
strategic-merge patch (a dict body) and a JSON patch (a list body), reads
the node back, and prints one line per result for the Go test to check.
"""

import sys

from kubernetes import client, config


def main():
    kubeconfig, node = sys.argv[1], sys.argv[2]
    config.load_kube_config(config_file=kubeconfig)
    v1 = client.CoreV1Api()

    nodes = v1.list_node()
    print("nodes:", ",".join(sorted(n.metadata.name for n in nodes.items)))
    print("list resourceVersion set:", bool(nodes.metadata.resource_version))

    patched = v1.patch_node(node, {"metadata": {"labels": {"e2e-python": "smp"}}})
    print("smp:", patched.metadata.name, patched.metadata.labels.get("e2e-python"))

    patched = v1.patch_node(node, [
        {"op": "add", "path": "/metadata/labels/e2e-python-json", "value": "jsonpatch"},
    ])
    print("jsonpatch:", patched.metadata.name, patched.metadata.labels.get("e2e-python-json"))

    got = v1.read_node(node)
    labels = ",".join("%s=%s" % kv for kv in sorted(got.metadata.labels.items()))
    print("labels:", labels)

    selected = v1.list_node(label_selector="e2e-python=smp")
    print("selected:", ",".join(n.metadata.name for n in selected.items))

    try:
        v1.read_node("e2e-python-missing")
        print("missing: found")
    except client.exceptions.ApiException as e:
        print("missing:", e.status, e.reason)


if __name__ == "__main__":
    main()
