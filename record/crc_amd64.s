//go:build !purego

#include "textflag.h"

// Folds the message 256 bytes at a time in four 512-bit accumulators (16
// lanes of 128 bits), each lane carried forward by two carry-less
// multiplies and added to the lane 256 bytes on; then the accumulators
// onto the last, 64 bytes at a time; then its four lanes onto one, whose
// CRC the CRC32 instruction finishes. See foldKeys.

// func castagnoliAVX512(crc uint32, p []byte, k *foldKeys) uint32
TEXT ·castagnoliAVX512(SB), NOSPLIT, $0-44
	MOVL crc+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX
	MOVQ k+32(FP), DX

	// The CRC register, inverted as hash/crc32 keeps it, is added into
	// the first four bytes: then the rest is a CRC from zero.
	NOTL AX
	VMOVD AX, X4
	VMOVDQU64 0(SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VMOVDQU64 192(SI), Z3
	VPXORQ Z4, Z0, Z0
	ADDQ $256, SI
	SUBQ $256, CX

	VBROADCASTI32X4 0(DX), Z8   // by256
	VBROADCASTI32X4 16(DX), Z9  // by64
	VMOVDQU64 32(DX), Z10       // lanes

loop256:
	CMPQ CX, $256
	JB   fold4
	VPCLMULQDQ $0x00, Z8, Z0, Z4
	VPCLMULQDQ $0x11, Z8, Z0, Z0
	VPCLMULQDQ $0x00, Z8, Z1, Z5
	VPCLMULQDQ $0x11, Z8, Z1, Z1
	VPCLMULQDQ $0x00, Z8, Z2, Z6
	VPCLMULQDQ $0x11, Z8, Z2, Z2
	VPCLMULQDQ $0x00, Z8, Z3, Z7
	VPCLMULQDQ $0x11, Z8, Z3, Z3
	VPTERNLOGD $0x96, 0(SI), Z4, Z0
	VPTERNLOGD $0x96, 64(SI), Z5, Z1
	VPTERNLOGD $0x96, 128(SI), Z6, Z2
	VPTERNLOGD $0x96, 192(SI), Z7, Z3
	ADDQ $256, SI
	SUBQ $256, CX
	JMP  loop256

fold4:
	// Z1 += fold(Z0), Z2 += fold(Z1), Z3 += fold(Z2), 64 bytes each.
	VPCLMULQDQ $0x00, Z9, Z0, Z4
	VPCLMULQDQ $0x11, Z9, Z0, Z0
	VPTERNLOGD $0x96, Z4, Z0, Z1
	VPCLMULQDQ $0x00, Z9, Z1, Z4
	VPCLMULQDQ $0x11, Z9, Z1, Z1
	VPTERNLOGD $0x96, Z4, Z1, Z2
	VPCLMULQDQ $0x00, Z9, Z2, Z4
	VPCLMULQDQ $0x11, Z9, Z2, Z2
	VPTERNLOGD $0x96, Z4, Z2, Z3

loop64:
	CMPQ CX, $64
	JB   reduce
	VPCLMULQDQ $0x00, Z9, Z3, Z4
	VPCLMULQDQ $0x11, Z9, Z3, Z3
	VPTERNLOGD $0x96, 0(SI), Z4, Z3
	ADDQ $64, SI
	SUBQ $64, CX
	JMP  loop64

reduce:
	// Lanes 0-2 of Z3 folded onto lane 3 (whose keys are zero), plus
	// lane 3 itself.
	VPCLMULQDQ $0x00, Z10, Z3, Z4
	VPCLMULQDQ $0x11, Z10, Z3, Z5
	VPXORQ Z5, Z4, Z4
	VEXTRACTI32X4 $3, Z3, X0
	VEXTRACTI32X4 $1, Z4, X1
	VEXTRACTI32X4 $2, Z4, X2
	VPXOR X4, X0, X0
	VPTERNLOGD $0x96, X2, X1, X0

	// The CRC from zero of the remaining 16 bytes.
	VMOVQ X0, BX
	VPEXTRQ $1, X0, R8
	XORL AX, AX
	CRC32Q BX, AX
	CRC32Q R8, AX
	NOTL AX
	VZEROUPPER
	MOVL AX, ret+40(FP)
	RET
