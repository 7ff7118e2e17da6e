/** A volume's record, as the volume service keeps it and the state store writes it. */
export interface VolumeRecord {
  name: string;
  driver: 'local';
  /** RFC 3339, whole seconds (what `docker volume inspect` shows). */
  createdAt: string;
  /** null when none were given (dockerd shows null then, {} for an empty map given). */
  labels: Record<string, string> | null;
  /** The driver options given at create (`type`, `device`, `o`); null when none were given. */
  options: Record<string, string> | null;
}

/** dockerd marks a volume created without a name with this label; prune and `rm -v` go by it. */
export const ANONYMOUS_LABEL = 'com.docker.volume.anonymous';

export const isAnonymous = (v: VolumeRecord): boolean => !!v.labels && Object.hasOwn(v.labels, ANONYMOUS_LABEL);

/** A volume, bind or tmpfs mount of a container, resolved at create (dockerd's MountPoint). */
export interface MountPointRecord {
  Type: 'volume' | 'bind' | 'tmpfs';
  Name: string;
  Source: string;
  Destination: string;
  Driver: string;
  Mode: string;
  RW: boolean;
  Propagation: string;
  /** Copy the image's content at Destination into an empty volume on first mount. */
  CopyData?: boolean;
  /** A path inside the volume mounted instead of its root (Mounts' VolumeOptions.Subpath). */
  Subpath?: string;
  /** Options of a tmpfs mount (mount(8) data). */
  TmpfsOptions?: string[];
  /** Bind mounts: recursive or not. */
  NonRecursive?: boolean;
  /** A `-v /host:/ctr` bind: a missing host directory is made at start (dockerd; `Mounts` refuse it). */
  CreateSource?: boolean;
}
