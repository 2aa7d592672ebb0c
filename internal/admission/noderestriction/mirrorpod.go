package noderestriction

import (
	corev1 "k8s.io/api/core/v1"
)

// forbiddenReference names the first kind of API object pod refers to that
// a node may not hand to a pod it creates, because reading it is what
// being bound to the pod would grant: "a service account", "secrets",
// "configmaps", "clustertrustbundles", "persistentvolumeclaims" or
// "resourceclaims". It returns "" when the pod refers to none of them.
// A reference counts as soon as it is present, named or not.
func forbiddenReference(pod *corev1.Pod) string {
	switch {
	case pod.Spec.ServiceAccountName != "":
		return "a service account"
	case refersToSecret(pod):
		return "secrets"
	case refersToConfigMap(pod):
		return "configmaps"
	case refersToClusterTrustBundle(pod):
		return "clustertrustbundles"
	case refersToPVC(pod):
		return "persistentvolumeclaims"
	case len(pod.Spec.ResourceClaims) > 0:
		return "resourceclaims"
	}
	return ""
}

// containerEnv is the environment of every container of a pod: init,
// regular and ephemeral.
func containerEnv(pod *corev1.Pod) (envFrom []corev1.EnvFromSource, env []corev1.EnvVar) {
	for _, c := range pod.Spec.InitContainers {
		envFrom, env = append(envFrom, c.EnvFrom...), append(env, c.Env...)
	}
	for _, c := range pod.Spec.Containers {
		envFrom, env = append(envFrom, c.EnvFrom...), append(env, c.Env...)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		envFrom, env = append(envFrom, c.EnvFrom...), append(env, c.Env...)
	}
	return envFrom, env
}

func refersToSecret(pod *corev1.Pod) bool {
	if len(pod.Spec.ImagePullSecrets) > 0 {
		return true
	}
	envFrom, env := containerEnv(pod)
	for _, e := range envFrom {
		if e.SecretRef != nil {
			return true
		}
	}
	for _, e := range env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			return true
		}
	}
	for _, v := range pod.Spec.Volumes {
		s := v.VolumeSource
		switch {
		case s.Secret != nil,
			s.AzureFile != nil,
			s.CephFS != nil && s.CephFS.SecretRef != nil,
			s.Cinder != nil && s.Cinder.SecretRef != nil,
			s.FlexVolume != nil && s.FlexVolume.SecretRef != nil,
			s.RBD != nil && s.RBD.SecretRef != nil,
			s.ScaleIO != nil && s.ScaleIO.SecretRef != nil,
			s.ISCSI != nil && s.ISCSI.SecretRef != nil,
			s.StorageOS != nil && s.StorageOS.SecretRef != nil,
			s.CSI != nil && s.CSI.NodePublishSecretRef != nil:
			return true
		}
		if s.Projected != nil {
			for _, p := range s.Projected.Sources {
				if p.Secret != nil {
					return true
				}
			}
		}
	}
	return false
}

func refersToConfigMap(pod *corev1.Pod) bool {
	envFrom, env := containerEnv(pod)
	for _, e := range envFrom {
		if e.ConfigMapRef != nil {
			return true
		}
	}
	for _, e := range env {
		if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
			return true
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil {
			return true
		}
		if v.Projected != nil {
			for _, p := range v.Projected.Sources {
				if p.ConfigMap != nil {
					return true
				}
			}
		}
	}
	return false
}

func refersToClusterTrustBundle(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, p := range v.Projected.Sources {
			if p.ClusterTrustBundle != nil {
				return true
			}
		}
	}
	return false
}

func refersToPVC(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			return true
		}
	}
	return false
}
