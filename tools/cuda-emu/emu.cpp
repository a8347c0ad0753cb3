/* cuda-emu runtime: see include/cuda_runtime_api.h. */
#include "cuda_runtime.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

struct emu_array {
	size_t w, h, d;
	bool layered;
	std::vector<float> data;
};
struct emu_stream { int unused; };
/* launches run to completion when they are made, so a record's host time is
 * when the stream reaches it */
struct emu_event { double t; };

namespace {
struct tex { cudaArray_t a; bool linear; };
std::map<unsigned long long, tex> texes;
unsigned long long next_tex = 1;
std::map<const char *, size_t> dev_allocs, host_allocs;
size_t dev_used;

size_t budget()
{
	const char *e = getenv("EMU_DEVICE_BYTES");
	return e ? strtoull(e, nullptr, 10) : (size_t)4 << 30;
}

bool in(const std::map<const char *, size_t> &m, const void *p)
{
	const char *c = (const char *)p;
	auto it = m.upper_bound(c);
	if (it == m.begin())
		return false;
	--it;
	return c >= it->first && c < it->first + it->second;
}

float texel(const emu_array *a, long x, long y, long z)
{
	if (x < 0 || y < 0 || z < 0 || (size_t)x >= a->w || (size_t)y >= a->h || (size_t)z >= a->d)
		return 0.0f; /* border colour 0 */
	return a->data[((size_t)z * a->h + (size_t)y) * a->w + (size_t)x];
}

/* the texture unit's weights: 9-bit fixed point, 8 fractional bits */
float hw_frac(float f) { return std::round(f * 256.0f) / 256.0f; }
}

void emu_launch(dim3 g, dim3 b, size_t, cudaStream_t, const std::function<void()> &f)
{
	gridDim = g;
	blockDim = b;
	for (unsigned bz = 0; bz < g.z; bz++)
		for (unsigned by = 0; by < g.y; by++)
			for (unsigned bx = 0; bx < g.x; bx++)
				for (unsigned tz = 0; tz < b.z; tz++)
					for (unsigned ty = 0; ty < b.y; ty++)
						for (unsigned tx = 0; tx < b.x; tx++) {
							blockIdx = {bx, by, bz};
							threadIdx = {tx, ty, tz};
							f();
						}
}

float emu_tex2dlayered(cudaTextureObject_t t, float x, float y, int layer)
{
	const tex &tx = texes.at(t);
	const emu_array *a = tx.a;
	if (!a->layered || layer < 0 || (size_t)layer >= a->d) {
		fprintf(stderr, "cuda-emu: bad layered fetch (layer %d)\n", layer);
		abort();
	}
	if (!tx.linear)
		return texel(a, (long)std::floor(x), (long)std::floor(y), layer);
	float xb = x - 0.5f, yb = y - 0.5f;
	long i = (long)std::floor(xb), j = (long)std::floor(yb);
	float al = hw_frac(xb - i), be = hw_frac(yb - j);
	return (1 - al) * (1 - be) * texel(a, i, j, layer) + al * (1 - be) * texel(a, i + 1, j, layer) +
	       (1 - al) * be * texel(a, i, j + 1, layer) + al * be * texel(a, i + 1, j + 1, layer);
}

float emu_tex3d(cudaTextureObject_t t, float x, float y, float z)
{
	const tex &tx = texes.at(t);
	const emu_array *a = tx.a;
	if (!tx.linear)
		return texel(a, (long)std::floor(x), (long)std::floor(y), (long)std::floor(z));
	float xb = x - 0.5f, yb = y - 0.5f, zb = z - 0.5f;
	long i = (long)std::floor(xb), j = (long)std::floor(yb), k = (long)std::floor(zb);
	float al = hw_frac(xb - i), be = hw_frac(yb - j), ga = hw_frac(zb - k);
	float s = 0;
	for (int c = 0; c < 8; c++) {
		float w = ((c & 1) ? al : 1 - al) * ((c & 2) ? be : 1 - be) * ((c & 4) ? ga : 1 - ga);
		s += w * texel(a, i + (c & 1), j + ((c >> 1) & 1), k + ((c >> 2) & 1));
	}
	return s;
}

extern "C" {

struct cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w, enum cudaChannelFormatKind f)
{
	return cudaChannelFormatDesc{x, y, z, w, f};
}

cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int)
{
	memset(p, 0, sizeof *p);
	snprintf(p->name, sizeof p->name, "cuda-emu (CPU)");
	for (int i = 0; i < 16; i++)
		p->uuid.bytes[i] = (char)(0x10 + i);
	p->totalGlobalMem = budget();
	p->major = 9;
	p->multiProcessorCount = 1;
	return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr, int) { *v = 1000; return cudaSuccess; }
cudaError_t cudaSetDevice(int) { return cudaSuccess; }
cudaError_t cudaGetDevice(int *d) { *d = 0; return cudaSuccess; }
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t cudaMemGetInfo(size_t *fr, size_t *tot)
{
	*tot = budget();
	*fr = budget() > dev_used ? budget() - dev_used : 0;
	return cudaSuccess;
}
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t) { return "cuda-emu error"; }
const char *cudaGetErrorName(cudaError_t) { return "cudaErrorEmu"; }

cudaError_t cudaMalloc(void **p, size_t n)
{
	if (dev_used + n > budget())
		return cudaErrorMemoryAllocation;
	char *c = (char *)malloc(n ? n : 1);
	memset(c, 0xA5, n); /* garbage, as device memory is */
	dev_allocs[c] = n;
	dev_used += n;
	*p = c;
	return cudaSuccess;
}
cudaError_t cudaFree(void *p)
{
	if (!p)
		return cudaSuccess;
	auto it = dev_allocs.find((const char *)p);
	if (it == dev_allocs.end())
		return cudaErrorInvalidValue;
	dev_used -= it->second;
	dev_allocs.erase(it);
	free(p);
	return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t n)
{
	char *c = (char *)malloc(n ? n : 1);
	host_allocs[c] = n;
	*p = c;
	return cudaSuccess;
}
cudaError_t cudaFreeHost(void *p)
{
	host_allocs.erase((const char *)p);
	free(p);
	return cudaSuccess;
}
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind) { memmove(d, s, n); return cudaSuccess; }
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t)
{
	return cudaMemcpy(d, s, n, k);
}
cudaError_t cudaMemset(void *d, int v, size_t n) { memset(d, v, n); return cudaSuccess; }
cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t) { memset(d, v, n); return cudaSuccess; }

cudaError_t cudaMalloc3DArray(cudaArray_t *a, const struct cudaChannelFormatDesc *, struct cudaExtent e, unsigned int flags)
{
	size_t bytes = e.width * e.height * e.depth * sizeof(float);
	if (dev_used + bytes > budget())
		return cudaErrorMemoryAllocation;
	emu_array *x = new emu_array{e.width, e.height, e.depth, (flags & cudaArrayLayered) != 0, {}};
	x->data.assign(e.width * e.height * e.depth, 12345.0f); /* garbage */
	dev_used += bytes;
	*a = x;
	return cudaSuccess;
}
cudaError_t cudaFreeArray(cudaArray_t a)
{
	dev_used -= a->data.size() * sizeof(float);
	delete a;
	return cudaSuccess;
}
cudaError_t cudaMemcpy3DAsync(const struct cudaMemcpy3DParms *p, cudaStream_t)
{
	if (!p->dstArray || p->srcArray || !p->srcPtr.ptr)
		return cudaErrorInvalidValue;
	emu_array *a = p->dstArray;
	const struct cudaExtent &e = p->extent;
	if (p->dstPos.x + e.width > a->w || p->dstPos.y + e.height > a->h || p->dstPos.z + e.depth > a->d ||
	    p->srcPtr.pitch < e.width * sizeof(float)) {
		fprintf(stderr, "cuda-emu: 3-D copy out of bounds\n");
		return cudaErrorInvalidValue;
	}
	for (size_t z = 0; z < e.depth; z++)
		for (size_t y = 0; y < e.height; y++) {
			const float *src = (const float *)((const char *)p->srcPtr.ptr +
							   (z * p->srcPtr.ysize + y) * p->srcPtr.pitch);
			float *dst = &a->data[((p->dstPos.z + z) * a->h + p->dstPos.y + y) * a->w + p->dstPos.x];
			memcpy(dst, src, e.width * sizeof(float));
		}
	return cudaSuccess;
}
cudaError_t cudaCreateTextureObject(cudaTextureObject_t *t, const struct cudaResourceDesc *r,
				    const struct cudaTextureDesc *d, const struct cudaResourceViewDesc *)
{
	if (r->resType != cudaResourceTypeArray || d->normalizedCoords || d->readMode != cudaReadModeElementType)
		return cudaErrorInvalidValue;
	for (int i = 0; i < 3; i++)
		if (d->addressMode[i] != cudaAddressModeBorder || d->borderColor[i] != 0.0f)
			return cudaErrorInvalidValue;
	*t = next_tex++;
	texes[*t] = tex{r->res.array.array, d->filterMode == cudaFilterModeLinear};
	return cudaSuccess;
}
cudaError_t cudaDestroyTextureObject(cudaTextureObject_t t) { texes.erase(t); return cudaSuccess; }
cudaError_t cudaStreamCreate(cudaStream_t *s) { *s = new emu_stream{0}; return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int) { return cudaStreamCreate(s); }
cudaError_t cudaStreamDestroy(cudaStream_t s) { delete s; return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned int) { return cudaSuccess; }
cudaError_t cudaEventCreate(cudaEvent_t *e) { *e = new emu_event{0.0}; return cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int) { return cudaEventCreate(e); }
cudaError_t cudaEventDestroy(cudaEvent_t e) { delete e; return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t)
{
	e->t = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
	return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	*ms = (float)(1e3 * (b->t - a->t));
	return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p)
{
	memset(a, 0, sizeof *a);
	a->type = in(dev_allocs, p) ? cudaMemoryTypeDevice : in(host_allocs, p) ? cudaMemoryTypeHost
										 : cudaMemoryTypeUnregistered;
	return cudaSuccess;
}
}
