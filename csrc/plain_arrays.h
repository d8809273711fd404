// What the plain call (bind_plain.cc) reads of a NumPy array, from NumPy's structs through
// pybind11's proxies: no NumPy headers at build time; and the byte-range test every overlap
// check of the bindings uses.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <array>
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

#include "dpcore/types.h"

namespace py = pybind11;

namespace dpcore {

// Whether the bytes [a, a + aBytes) and [b, b + bBytes) share none (an empty range shares none):
// the host path's overlap checks, here and in bindings.cc (overlap, piece_table).
inline bool bytesApart(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  const auto at = reinterpret_cast<uintptr_t>(a), bt = reinterpret_cast<uintptr_t>(b);
  return !aBytes || !bBytes || at + aBytes <= bt || bt + bBytes <= at;
}

constexpr int kPlainTypeNums = 32;  // NumPy's built-in dtypes (NPY_NTYPES_LEGACY is 24)
constexpr char kNativeOrder = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? '<' : '>';

// What a plain call reads of an array: an exact NumPy array (a subclass may mean more than its
// memory), C-contiguous, of a dtype dpcore moves in native byte order.
struct PlainArray {
  char* data;
  size_t count;  // elements
  int dtype;     // dpcore's code
  bool writable;
  int nd;
  const py::ssize_t* dims;

  size_t nbytes() const { return count * dtypeSize(static_cast<DType>(dtype)); }
  bool apartFrom(const PlainArray& b) const {
    return bytesApart(data, nbytes(), b.data, b.nbytes());
  }
  // whether it takes x's elementwise result as it is: x's dtype and shape, writable, and either
  // x's very memory or apart from it
  bool takesResultOf(const PlainArray& x) const {
    if (dtype != x.dtype || nd != x.nd || !writable) return false;
    for (int d = 0; d < nd; ++d) {
      if (dims[d] != x.dims[d]) return false;
    }
    return data == x.data || apartFrom(x);
  }
};

// Reads arrays for the plain call, of the dtypes in its table: (NumPy type number, dpcore code)
// of the built-in dtypes dpcore moves (dpcore/comm/plain.py).
class PlainArrays {
  using Npy = py::detail::npy_api;

 public:
  explicit PlainArrays(const std::vector<std::pair<int, int>>& dtypes)
      : ndarray_(Npy::get().PyArray_Type_) {
    codeOf_.fill(-1);
    for (auto [typeNum, code] : dtypes) {
      if (typeNum < 0 || typeNum >= kPlainTypeNums || code < 0 || code >= kNumDTypes) {
        throw std::invalid_argument("dpcore: a dtype out of the plain call's table");
      }
      codeOf_[typeNum] = code;
    }
  }

  // o as a PlainArray, or false where it is not one
  bool read(PyObject* o, PlainArray* p) const {
    if (Py_TYPE(o) != ndarray_) return false;
    const auto* array = py::detail::array_proxy(o);
    const auto* descr = py::detail::array_descriptor_proxy(array->descr);
    const char order = descr->byteorder;
    if (!(array->flags & Npy::NPY_ARRAY_C_CONTIGUOUS_) || descr->type_num < 0 ||
        descr->type_num >= kPlainTypeNums ||
        (order != '=' && order != '|' && order != kNativeOrder)) {
      return false;
    }
    const int code = codeOf_[descr->type_num];
    if (code < 0) return false;
    size_t count = 1;
    for (int d = 0; d < array->nd; ++d) count *= static_cast<size_t>(array->dimensions[d]);
    const bool writable = (array->flags & Npy::NPY_ARRAY_WRITEABLE_) != 0;
    *p = PlainArray{array->data, count, code, writable, array->nd, array->dimensions};
    return true;
  }

  // A new C-contiguous array of x's dtype and shape (np.empty_like); empty where NumPy failed.
  py::object emptyLike(PyObject* x, const PlainArray& a) const {
    PyObject* descr = py::detail::array_proxy(x)->descr;
    Py_INCREF(descr);  // NewFromDescr takes it
    return py::reinterpret_steal<py::object>(Npy::get().PyArray_NewFromDescr_(
        ndarray_, descr, a.nd, a.dims, nullptr, nullptr, 0, nullptr));
  }

 private:
  PyTypeObject* ndarray_;
  std::array<int, kPlainTypeNums> codeOf_{};
};

}  // namespace dpcore
