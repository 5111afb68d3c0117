#!/bin/sh
# Each member's credentials, and nothing more, from the cluster's directory on the operator's
# host (the one `specie cluster up` made): ./pki/<member>, owned by the image's user (uid 10001: run it as root). Keys: keep pki/ private.
set -eu
DIR=${1:?usage: credentials.sh CLUSTER_DIR}
for member in shard-0-1 shard-0-2 shard-0-3 coordinator-0-1 coordinator-0-2 coordinator-0-3 sentinel-0; do
  specie cluster credentials --dir "$DIR" --name "$member" --out "pki/$member"
  chown -R 10001:10001 "pki/$member"
done
