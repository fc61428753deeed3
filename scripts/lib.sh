# Helpers shared by the end-to-end scripts; source it.

# free_ports N: the first of N consecutive loopback ports nothing answers
# on, or nothing if 50 random tries found none.
free_ports() {
	local n=$1 candidate i free
	for _ in $(seq 1 50); do
		candidate=$((20000 + RANDOM % 40000))
		free=1
		for ((i = 0; i < n; i++)); do
			if (exec 3<>"/dev/tcp/127.0.0.1/$((candidate + i))") 2>/dev/null; then free=0; fi
		done
		if [ $free = 1 ]; then
			echo "$candidate"
			return 0
		fi
	done
}
