//go:build !purego

#include "textflag.h"

// The CRC folds the message 256 bytes at a time in four 512-bit
// accumulators (16 lanes of 128 bits), each lane carried forward by two
// carry-less multiplies and added to the lane 256 bytes on; then the
// accumulators onto the last, 64 bytes at a time; then its four lanes
// onto one, whose CRC the CRC32 instruction finishes. See foldKeys.
//
// Registers: SI the next bytes to fold, CX how many are left, Z0-Z3 the
// accumulators, Z4-Z7 scratch, Z8-Z10 the keys.

// CRC_START folds in the CRC register (AX, as hash/crc32 keeps it),
// loads the first 256 bytes and the keys (from DX).
#define CRC_START \
	NOTL AX                     \
	VMOVD AX, X4                \
	VMOVDQU64 0(SI), Z0         \
	VMOVDQU64 64(SI), Z1        \
	VMOVDQU64 128(SI), Z2       \
	VMOVDQU64 192(SI), Z3       \
	VPXORQ Z4, Z0, Z0           \
	ADDQ $256, SI               \
	SUBQ $256, CX               \
	VBROADCASTI32X4 0(DX), Z8   \
	VBROADCASTI32X4 16(DX), Z9  \
	VMOVDQU64 32(DX), Z10

// CRC_HALF1 folds the first 128 bytes of the next 256 into Z0 and Z1;
// CRC_HALF2 the other 128 into Z2 and Z3, and moves on past the 256.
// castagnoliCheckAVX512 spreads them over two records; CRC_STEP is both.
#define CRC_HALF1 \
	VPCLMULQDQ $0x00, Z8, Z0, Z4    \
	VPCLMULQDQ $0x11, Z8, Z0, Z0    \
	VPCLMULQDQ $0x00, Z8, Z1, Z5    \
	VPCLMULQDQ $0x11, Z8, Z1, Z1    \
	VPTERNLOGD $0x96, 0(SI), Z4, Z0 \
	VPTERNLOGD $0x96, 64(SI), Z5, Z1

#define CRC_HALF2 \
	VPCLMULQDQ $0x00, Z8, Z2, Z6      \
	VPCLMULQDQ $0x11, Z8, Z2, Z2      \
	VPCLMULQDQ $0x00, Z8, Z3, Z7      \
	VPCLMULQDQ $0x11, Z8, Z3, Z3      \
	VPTERNLOGD $0x96, 128(SI), Z6, Z2 \
	VPTERNLOGD $0x96, 192(SI), Z7, Z3 \
	ADDQ $256, SI                     \
	SUBQ $256, CX

#define CRC_STEP CRC_HALF1; CRC_HALF2

// CRC_END folds what is left (CX < 256, a multiple of 64) and leaves the
// CRC in AX. It uses labels fold64 and reduce.
#define CRC_END \
	VPCLMULQDQ $0x00, Z9, Z0, Z4      \
	VPCLMULQDQ $0x11, Z9, Z0, Z0      \
	VPTERNLOGD $0x96, Z4, Z0, Z1      \
	VPCLMULQDQ $0x00, Z9, Z1, Z4      \
	VPCLMULQDQ $0x11, Z9, Z1, Z1      \
	VPTERNLOGD $0x96, Z4, Z1, Z2      \
	VPCLMULQDQ $0x00, Z9, Z2, Z4      \
	VPCLMULQDQ $0x11, Z9, Z2, Z2      \
	VPTERNLOGD $0x96, Z4, Z2, Z3      \
fold64:                               \
	CMPQ CX, $64                      \
	JB   reduce                       \
	VPCLMULQDQ $0x00, Z9, Z3, Z4      \
	VPCLMULQDQ $0x11, Z9, Z3, Z3      \
	VPTERNLOGD $0x96, 0(SI), Z4, Z3   \
	ADDQ $64, SI                      \
	SUBQ $64, CX                      \
	JMP  fold64                       \
reduce:                               \
	VPCLMULQDQ $0x00, Z10, Z3, Z4     \
	VPCLMULQDQ $0x11, Z10, Z3, Z5     \
	VPXORQ Z5, Z4, Z4                 \
	VEXTRACTI32X4 $3, Z3, X0          \
	VEXTRACTI32X4 $1, Z4, X1          \
	VEXTRACTI32X4 $2, Z4, X2          \
	VPXOR X4, X0, X0                  \
	VPXOR X1, X0, X0                  \
	VPXOR X2, X0, X0                  \
	VMOVQ X0, BX                      \
	VPEXTRQ $1, X0, DX                \
	XORL AX, AX                       \
	CRC32Q BX, AX                     \
	CRC32Q DX, AX                     \
	NOTL AX                           \
	VZEROUPPER

// func castagnoliAVX512(crc uint32, p []byte, k *foldKeys) uint32
TEXT ·castagnoliAVX512(SB), NOSPLIT, $0-44
	MOVL crc+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX
	MOVQ k+32(FP), DX
	CRC_START

loop:
	CMPQ CX, $256
	JB   end
	CRC_STEP
	JMP  loop

end:
	CRC_END
	MOVL AX, ret+40(FP)
	RET

// func castagnoliCheckAVX512(region, body []byte, n int, k *foldKeys) (crc uint32, p, i int)
//
// The CRC of region (from zero, as CRC), and alongside it checkRecords'
// fast path over body (which lies within region), record by record from
// the first, half a 256-byte CRC step per record. The two use different
// units of the CPU (vector multiplies; scalar loads, compares and
// branches), so the records are checked in about the time the CRC takes
// alone. The record checks stop, without taking the record, at the first
// that is not of the fast shape (see checkRecords, which this follows
// field by field, but for offset deltas of three bytes, past record 8191,
// which it leaves), after n records, or when the CRC is done; p and i say
// where, for checkRecordsFrom to go on. A record is read only within
// body: 16 bytes from its start, and the value length at q <= len-2.
//
// Registers besides the CRC's: DI body, R8 len(body), R9 p, R10 i, R12
// end of the record, R13 k (offset in it), AX x, BX, DX, R11 scratch.
TEXT ·castagnoliCheckAVX512(SB), NOSPLIT, $0-88
	MOVQ region_base+0(FP), SI
	MOVQ region_len+8(FP), CX
	MOVQ body_base+24(FP), DI
	MOVQ body_len+32(FP), R8
	MOVQ k+56(FP), DX
	XORQ R9, R9
	XORQ R10, R10
	XORL AX, AX
	CRC_START

record:
	// Half a 256-byte CRC step before each record: the first half
	// before an even record (if 256 bytes are left), the second before
	// an odd one. That keeps the CRC and the records in step without a
	// branch the CPU could mispredict.
	TESTQ $1, R10
	JNZ  odd
	CMPQ CX, $256
	JB   end
	CRC_HALF1
	JMP  check
odd:
	CRC_HALF2
check:
	CMPQ R10, n+48(FP)
	JGE  stop
	// 16 bytes from p: p <= len-16.
	MOVQ R8, BX
	SUBQ $16, BX
	CMPQ R9, BX
	JGT  stop
	MOVQ (DI)(R9*1), AX

	// Length, one or two bytes, non-negative: R12 = end.
	MOVQ AX, BX
	ANDQ $0x8081, BX
	CMPQ BX, $0x80
	JNE  length1
	MOVQ AX, BX
	SHRQ $1, BX
	ANDQ $0x3f, BX
	MOVQ AX, DX
	SHRQ $2, DX
	ANDQ $0x1fc0, DX
	ORQ  DX, BX
	LEAQ 2(R9)(BX*1), R12
	MOVQ $3, R13
	SHRQ $24, AX
	JMP  timestamp
length1:
	TESTQ $0x81, AX
	JNZ  stop
	MOVQ AX, BX
	SHRQ $1, BX
	ANDQ $0x3f, BX
	LEAQ 1(R9)(BX*1), R12
	MOVQ $2, R13
	SHRQ $16, AX

timestamp:
	TESTQ $0x80, AX
	JNZ  timestamp2
	INCQ R13
	SHRQ $8, AX
	JMP  offset
timestamp2:
	TESTQ $0x8000, AX
	JNZ  stop
	ADDQ $2, R13
	SHRQ $16, AX

offset:
	// Offset delta i, compared with the encodings of zi = 2i in BX.
	LEAQ (R10)(R10*1), BX
	TESTQ $0x80, AX
	JNZ  offset2
	MOVBQZX AX, DX
	CMPQ DX, BX
	JNE  stop
	INCQ R13
	JMP  key
offset2:
	TESTQ $0x8000, AX
	JNZ  stop // three bytes: past record 8191, left to checkRecords
	MOVWQZX AX, DX
	MOVQ BX, R11
	ANDQ $-128, R11
	LEAQ 0x80(BX)(R11*1), R11
	CMPQ DX, R11
	JNE  stop
	ADDQ $2, R13
	JMP  key
key:
	// Key: null or a length; BX = q, where the value length starts,
	// and DX its bytes. k <= 8, so w[k:k+8] is within the 16 bytes.
	LEAQ (DI)(R9*1), DX
	MOVQ (DX)(R13*1), DX
	CMPB DX, $1
	JNE  keyLength
	LEAQ 1(R9)(R13*1), BX
	SHRQ $8, DX
	JMP  value
keyLength:
	TESTQ $0x81, DX
	JNZ  keyLength2
	MOVQ DX, AX
	SHRQ $1, AX
	ANDQ $0x3f, AX
	LEAQ 1(R9)(R13*1), BX
	ADDQ AX, BX
	JMP  keyEnd
keyLength2:
	MOVQ DX, AX
	ANDQ $0x8081, AX
	CMPQ AX, $0x80
	JNE  stop
	MOVQ DX, AX
	SHRQ $1, AX
	ANDQ $0x3f, AX
	SHRQ $2, DX
	ANDQ $0x1fc0, DX
	ORQ  DX, AX
	LEAQ 2(R9)(R13*1), BX
	ADDQ AX, BX
keyEnd:
	MOVQ R8, AX
	SUBQ $2, AX
	CMPQ BX, AX
	JGT  stop
	MOVWQZX (DI)(BX*1), DX

value:
	// Value: null right before the header count, or a length of
	// exactly the bytes up to it (t = end-q), compared zigzag-encoded.
	MOVQ R12, AX
	SUBQ BX, AX
	TESTQ $0x80, DX
	JNZ  value2
	ANDQ $0xff, DX
	LEAQ -4(AX)(AX*1), R11
	CMPQ DX, R11
	JEQ  headers
	CMPQ DX, $1
	JNE  stop
	CMPQ AX, $2
	JNE  stop
	JMP  headers
value2:
	TESTQ $0x8000, DX
	JNZ  stop
	MOVQ DX, R11
	ANDQ $0x7f, R11
	SHRQ $1, DX
	ANDQ $0x3f80, DX
	ORQ  R11, DX
	LEAQ -6(AX)(AX*1), R11
	CMPQ DX, R11
	JNE  stop

headers:
	// Header count 0, the last byte, within body.
	LEAQ -1(R12), AX
	CMPQ AX, R8
	JAE  stop
	CMPB (DI)(AX*1), $0
	JNE  stop
	MOVQ R12, R9
	INCQ R10
	JMP  record

stop:
	// Finish the CRC step begun before an even record.
	TESTQ $1, R10
	JNZ  crcOnly
	CRC_HALF2

crcOnly:
	CMPQ CX, $256
	JB   end
	CRC_STEP
	JMP  crcOnly

end:
	CRC_END
	MOVL AX, crc+64(FP)
	MOVQ R9, p+72(FP)
	MOVQ R10, i+80(FP)
	RET
