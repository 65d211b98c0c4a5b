// Global -> shared tile copies for every alignment class, with zero fill.
//
// The user's rows are read where they are: a bf16 row of 127 elements is only
// 2-byte aligned. The path comes from the spec's alignment class (kVec):
//   8        rows and pointers 16-byte aligned: cp.async of 16 bytes
//   4, 2, 1  contiguous rows with 8-, 4- or 2-byte alignment: aligned 16-byte
//            loads around the row, shifted into place in registers
//   0        a dim stride other than 1: one element at a time
// Rows past the sequence end and columns past the head dimension are
// zero-filled in shared memory, never by padding the tensor in global memory.
#pragma once

#include "common.cuh"
#include "copy/global_loads.cuh"

namespace flashgen_device {

// Offset in elements of element (row, col) of a [rows][kCols] tile in the
// core-matrix layout the warpgroup MMA reads (8 x 8 blocks of 128 bytes, one
// after another along the row's 16-byte chunks, then by groups of 8 rows;
// arch/wgmma.cuh).
template <int kCols>
__device__ __forceinline__ int core_matrix_offset(int row, int col) {
  return ((row >> 3) * (kCols / 8) + (col >> 3)) * 64 + (row & 7) * 8 + (col & 7);
}

// Offset in elements of element (row, col) of a shared [rows][kCols] tile:
// row-major with rows kSharedStride apart, or the core-matrix layout.
template <int kCols, int kSharedStride, bool kCoreMatrix>
__device__ __forceinline__ int tile_offset(int row, int col) {
  return kCoreMatrix ? core_matrix_offset<kCols>(row, col) : row * kSharedStride + col;
}

// Rows [r0, r0 + 16) of a source as base + r · stride from r0 where they
// lie that way; base nullptr where they must be found row by row.
struct RowRun {
  const u16* base;
  index_t stride;
};

// Where the rows of a copied tile lie. Row r of a StridedRows is at base +
// r · stride: a plain call's tensors. A gathered source (kGathered: a KV
// cache's rows, copy/cache_rows.cuh) finds each row's address and may have
// none (nullptr: a page its block table does not name), which reads as
// zeros; it is asked only for rows the tile holds (r < valid_rows). Both
// give their rows in runs of 16 and a harmless address for copies of 0
// bytes.
struct StridedRows {
  static constexpr bool kGathered = false;
  const u16* base;
  index_t stride;
  __device__ __forceinline__ const u16* row(int r) const { return base + r * stride; }
  __device__ __forceinline__ RowRun run(int r0) const { return {row(r0), stride}; }
  __device__ __forceinline__ const u16* harmless() const { return base; }
  // The rows from row `first` on.
  __device__ __forceinline__ StridedRows from(int first) const { return {row(first), stride}; }
};

// Row r of `rows`, or nullptr past valid_rows where the source gathers.
template <class Rows>
__device__ __forceinline__ const u16* source_row(const Rows& rows, int r, int valid_rows) {
  if constexpr (Rows::kGathered)
    return r < valid_rows ? rows.row(r) : nullptr;
  else
    return rows.row(r);
}

// Whether row r of a tile is read: inside valid_rows, and where the source
// gathers, a row it has.
template <class Rows>
__device__ __forceinline__ bool row_is_read(const u16* source, int r, int valid_rows) {
  return r < valid_rows && (!Rows::kGathered || source != nullptr);
}

// Copies a [kRows][kCols] tile of `rows` (column stride in elements) into
// shared memory laid out [kRows][kSharedStride] (kCoreMatrix: in the
// core-matrix layout instead).
// Elements at rows >= valid_rows or columns >= valid_cols become zero.
template <int kRows, int kCols, int kSharedStride, int kVec, int kThreads,
          bool kCoreMatrix = false, class Rows>
__device__ __forceinline__ void load_rows(u16* shared, const Rows& rows, index_t col_stride,
                                          int valid_rows, int valid_cols, int thread) {
  static_assert(kCols % 8 == 0, "tiles are padded to whole 16-byte chunks");
  constexpr int kChunksPerRow = kCols / 8;
  constexpr int kChunks = kRows * kChunksPerRow;
  if (kVec == 8 && Rows::kGathered) {
    // 16 rows at a time, each run's address found once (a page lookup)
    // rather than every chunk's, all of them first so that the lookups
    // overlap. Where every run the tile reads is one strided piece (the
    // rule), its chunks are copied as a strided tile's; otherwise (a run
    // straddling the append, a page the table does not name) row by row.
    static_assert(kRows % 16 == 0, "gathered tiles are whole runs of 16 rows");
    constexpr int kRuns = kRows / 16, kRunChunks = 16 * kChunksPerRow;
    RowRun runs[kRuns];
    bool strided = true;
#pragma unroll
    for (int i = 0; i < kRuns; ++i) {
      runs[i] = 16 * i < valid_rows ? rows.run(16 * i) : RowRun{rows.harmless(), 0};
      strided = strided && runs[i].base != nullptr;
    }
    // One chunk: `source` the row's first element (read where `read`).
    const auto copy_chunk = [&](int row, int col, const u16* source, bool read) {
      const int valid = read ? max_of(min_of(8, valid_cols - col), 0) : 0;
      cp_async_zfill<16>(shared + tile_offset<kCols, kSharedStride, kCoreMatrix>(row, col),
                         valid > 0 ? source + col : rows.harmless(), valid * 2);
    };
    if (strided) {
#pragma unroll
      for (int i = 0; i < kRuns; ++i)
#pragma unroll 4
        for (int chunk = thread; chunk < kRunChunks; chunk += kThreads) {
          const int r = chunk / kChunksPerRow, row = 16 * i + r;
          copy_chunk(row, (chunk % kChunksPerRow) * 8, runs[i].base + r * runs[i].stride,
                     row < valid_rows);
        }
    } else {
#pragma unroll 4
      for (int chunk = thread; chunk < kChunks; chunk += kThreads) {
        const int row = chunk / kChunksPerRow;
        const u16* source = source_row(rows, row, valid_rows);
        copy_chunk(row, (chunk % kChunksPerRow) * 8, source,
                   row_is_read<Rows>(source, row, valid_rows));
      }
    }
  } else if (kVec == 8) {
#pragma unroll 4
    for (int chunk = thread; chunk < kChunks; chunk += kThreads) {
      const int row = chunk / kChunksPerRow;
      const int col = (chunk % kChunksPerRow) * 8;
      const u16* source = source_row(rows, row, valid_rows);
      int valid = row_is_read<Rows>(source, row, valid_rows) ? min_of(8, valid_cols - col) : 0;
      valid = max_of(valid, 0);
      // A chunk with nothing to read still issues a copy of 0 bytes (zero fill)
      // from a harmless address.
      const u16* src = valid > 0 ? source + col : rows.harmless();
      cp_async_zfill<16>(shared + tile_offset<kCols, kSharedStride, kCoreMatrix>(row, col), src,
                         valid * 2);
    }
  } else if (kVec >= 1) {
    // Loads in batches of kBatch chunks, then their stores: the loads of a
    // batch overlap, and the staging registers stay few while accumulators live.
    constexpr int kPerThread = ceil_div(kChunks, kThreads);
    constexpr int kBatch = kPerThread < 4 ? kPerThread : 4;
#pragma unroll
    for (int first = 0; first < kPerThread; first += kBatch) {
      uint4 staged[kBatch];
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int chunk = thread + (first + i) * kThreads;
        const int row = chunk / kChunksPerRow;
        const int col = (chunk % kChunksPerRow) * 8;
        staged[i] = make_uint4(0, 0, 0, 0);
        if (first + i < kPerThread && chunk < kChunks && row < valid_rows && col < valid_cols) {
          const u16* source = source_row(rows, row, valid_rows);
          if (row_is_read<Rows>(source, row, valid_rows))
            staged[i] = load8_shifted(source, col, valid_cols);
        }
      }
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int chunk = thread + (first + i) * kThreads;
        if (first + i < kPerThread && chunk < kChunks)
          *reinterpret_cast<uint4*>(shared + tile_offset<kCols, kSharedStride, kCoreMatrix>(
                                                 chunk / kChunksPerRow,
                                                 (chunk % kChunksPerRow) * 8)) = staged[i];
      }
    }
  } else {
#pragma unroll 4
    for (int e = thread; e < kRows * kCols; e += kThreads) {
      const int row = e / kCols;
      const int col = e % kCols;
      u16 value = 0;
      if (row < valid_rows && col < valid_cols) {
        const u16* source = source_row(rows, row, valid_rows);
        if (row_is_read<Rows>(source, row, valid_rows)) value = source[col * col_stride];
      }
      shared[tile_offset<kCols, kSharedStride, kCoreMatrix>(row, col)] = value;
    }
  }
}

// load_rows of the rows `row_stride` elements apart from `global` on.
template <int kRows, int kCols, int kSharedStride, int kVec, int kThreads,
          bool kCoreMatrix = false>
__device__ __forceinline__ void load_tile(u16* shared, const u16* global, index_t row_stride,
                                          index_t col_stride, int valid_rows, int valid_cols,
                                          int thread) {
  load_rows<kRows, kCols, kSharedStride, kVec, kThreads, kCoreMatrix>(
      shared, StridedRows{global, row_stride}, col_stride, valid_rows, valid_cols, thread);
}

// A [kRows][kCols] tile in the core-matrix layout whose element (row, col)
// is element col - shift of the row (0 <= shift < 16; zero before the row's
// first and past its `valid_cols`), from contiguous rows of any alignment:
// the token-row forward's Q, shifted as its K. Aligned loads shifted in
// registers; where a chunk starts before the row, element by element.
template <int kRows, int kCols, int kThreads>
__device__ __forceinline__ void load_tile_shifted(u16* tile, const u16* global,
                                                  index_t row_stride, int valid_rows,
                                                  int valid_cols, int shift, int thread) {
  static_assert(kCols % 8 == 0, "tiles are padded to whole 16-byte chunks");
  constexpr int kChunksPerRow = kCols / 8;
#pragma unroll 1
  for (int chunk = thread; chunk < kRows * kChunksPerRow; chunk += kThreads) {
    const int row = chunk / kChunksPerRow;
    const int first = (chunk % kChunksPerRow) * 8 - shift;  // the row's element in column 0
    const u16* source = global + row * row_stride;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (row < valid_rows && first < valid_cols) {
      if (first >= 0) {
        value = load8_shifted(source, first, valid_cols);
      } else {
        u32 words[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int e0 = first + 2 * i, e1 = e0 + 1;
          const u32 lo = e0 >= 0 && e0 < valid_cols ? source[e0] : 0u;
          const u32 hi = e1 >= 0 && e1 < valid_cols ? source[e1] : 0u;
          words[i] = lo | (hi << 16);
        }
        value = make_uint4(words[0], words[1], words[2], words[3]);
      }
    }
    *reinterpret_cast<uint4*>(tile + core_matrix_offset<kCols>(row, (chunk % kChunksPerRow) * 8)) =
        value;
  }
}

// A tile copy that may take two steps. Rows that are contiguous but not
// 16-byte aligned (kVec 1, 2, 4) are copied asynchronously as the aligned
// 16-byte chunks around them into a staging area (issue), and shifted into
// place once they have arrived (finish): the wide loads stay asynchronous and
// overlap compute, at the price of one shared-memory pass. Other classes are
// done after issue (cp.async for kVec 8, element gathers for kVec 0).
//
// Use: issue → cp_async_wait + __syncthreads → finish → __syncthreads → read
// (the __syncthreads also publishes the staging stores issue made itself).
// kCoreMatrix: finish writes the core-matrix layout (kSharedStride unused).
template <int kRows, int kCols, int kSharedStride, int kVec, int kThreads,
          bool kCoreMatrix = false>
struct TileCopy {
  static constexpr bool kStaged = kVec >= 1 && kVec < 8;
  static constexpr int kStageChunks = kCols / 8 + 1;  // the row's span in aligned chunks
  static constexpr int kStageStride = kStageChunks * 8;
  static constexpr int kStageElements = kRows * kStageStride;  // [kRows][kStageChunks · 8]

  template <class Rows>
  static __device__ __forceinline__ void issue(u16* shared, u16* staging, const Rows& rows,
                                               index_t col_stride, int valid_rows,
                                               int valid_cols, int thread) {
    if (!kStaged) {
      load_rows<kRows, kCols, kSharedStride, kVec, kThreads>(shared, rows, col_stride,
                                                             valid_rows, valid_cols, thread);
      return;
    }
#pragma unroll 4
    for (int chunk = thread; chunk < kRows * kStageChunks; chunk += kThreads) {
      const int row = chunk / kStageChunks, c = chunk % kStageChunks;
      const u16* source = source_row(rows, row, valid_rows);
      const u64 address = reinterpret_cast<u64>(source);
      const u64 first = (address & ~u64(15)) + 16 * c;
      const u64 end = address + 2 * static_cast<u64>(max_of(valid_cols, 0));
      u16* stage = staging + row * kStageStride + c * 8;
      // The aligned chunks holding an element of the row go by cp.async
      // (chunks with nothing to read as zero-filling copies of 0 bytes),
      // but for the last chunk of a row that may end the caller's tensor: a
      // cp.async reads its whole 16-byte window whatever its source size
      // (past the tensor where the row ends inside the window). That is the
      // sequence's last row of a strided source, read element by element
      // below; any row of a gathered one, read element by element here.
      const bool inside = row_is_read<Rows>(source, row, valid_rows) && first < end;
      const bool tail =
          inside && (Rows::kGathered || row == valid_rows - 1) && first + 16 > end;
      if (!tail) {
        cp_async_zfill<16>(stage, inside ? reinterpret_cast<const void*>(first) : rows.harmless(),
                           inside ? 16 : 0);
      } else if constexpr (Rows::kGathered) {
        const int e0 = static_cast<int>(static_cast<long long>(first - address) / 2);
#pragma unroll 1
        for (int i = 0; i < 8; ++i) {
          const int e = e0 + i;  // the element's column (negative before the row)
          stage[i] = e >= 0 && e < valid_cols ? source[e] : u16(0);
        }
      }
    }
    if constexpr (!Rows::kGathered) {
      if (thread == 0 && valid_rows >= 1 && valid_rows <= kRows && valid_cols > 0) {
        const u16* row = rows.row(valid_rows - 1);
        // Elements before it in its chunk, and the chunk of its last element.
        const int skew = static_cast<int>(reinterpret_cast<u64>(row) & 15) / 2;
        const int last = (skew + valid_cols - 1) / 8;
        // Only where the row ends inside its last chunk, and inside this tile:
        // a tile of a column slice (valid_cols > kCols) ends mid-row, its last
        // chunk went by cp.async above, and a chunk past kStageChunks would be
        // the next row's staging (or past the staging area).
        if ((skew + valid_cols) % 8 != 0 && last < kStageChunks) {
          u16* stage = staging + (valid_rows - 1) * kStageStride + last * 8;
#pragma unroll 1
          for (int i = 0; i < 8; ++i) {
            const int e = last * 8 + i - skew;  // the element's column
            stage[i] = e >= 0 && e < valid_cols ? row[e] : u16(0);
          }
        }
      }
    }
  }

  template <class Rows>
  static __device__ __forceinline__ void finish(u16* shared, const u16* staging, const Rows& rows,
                                                int valid_rows, int valid_cols, int thread) {
    if (!kStaged) return;
    constexpr int kChunksPerRow = kCols / 8;
#pragma unroll 4
    for (int chunk = thread; chunk < kRows * kChunksPerRow; chunk += kThreads) {
      const int row = chunk / kChunksPerRow, c = chunk % kChunksPerRow;
      uint4 value = make_uint4(0, 0, 0, 0);
      if (row < valid_rows && c * 8 < valid_cols) {
        const u16* source = source_row(rows, row, valid_rows);
        if (row_is_read<Rows>(source, row, valid_rows)) {
          const int offset = static_cast<int>(reinterpret_cast<u64>(source) & 15);
          const uint4* stage = reinterpret_cast<const uint4*>(staging + row * kStageStride) + c;
          value = shift_and_mask(stage[0], stage[1], offset, valid_cols - c * 8);
        }
      }
      *reinterpret_cast<uint4*>(shared + tile_offset<kCols, kSharedStride, kCoreMatrix>(
                                             row, c * 8)) = value;
    }
  }

  // The same of the rows `row_stride` elements apart from `global` on.
  static __device__ __forceinline__ void issue(u16* shared, u16* staging, const u16* global,
                                               index_t row_stride, index_t col_stride,
                                               int valid_rows, int valid_cols, int thread) {
    issue(shared, staging, StridedRows{global, row_stride}, col_stride, valid_rows, valid_cols,
          thread);
  }
  static __device__ __forceinline__ void finish(u16* shared, const u16* staging,
                                                const u16* global, index_t row_stride,
                                                int valid_rows, int valid_cols, int thread) {
    finish(shared, staging, StridedRows{global, row_stride}, valid_rows, valid_cols, thread);
  }
};

// Shared storage of a kernel whose traversed tiles arrive through two
// TileCopy copies: its Tiles, then both copies' staging areas when they stage
// (alignment classes 1, 2, 4; an fp8 cache's), kCount of each (a ring of
// staged copies in flight), nothing otherwise.
template <class Tiles, class FirstCopy, class SecondCopy, bool kStaged = FirstCopy::kStaged,
          int kCount = 1>
struct WithStaging : Tiles {
  u16 first_stage[kCount][FirstCopy::kStageElements];
  u16 second_stage[kCount][SecondCopy::kStageElements];
  __device__ __forceinline__ u16* first_staging(int i = 0) { return first_stage[i]; }
  __device__ __forceinline__ u16* second_staging(int i = 0) { return second_stage[i]; }
};
template <class Tiles, class FirstCopy, class SecondCopy, int kCount>
struct WithStaging<Tiles, FirstCopy, SecondCopy, false, kCount> : Tiles {
  __device__ __forceinline__ u16* first_staging(int = 0) { return nullptr; }
  __device__ __forceinline__ u16* second_staging(int = 0) { return nullptr; }
};

}  // namespace flashgen_device
