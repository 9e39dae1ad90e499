# SPDX-License-Identifier: BSD-3-Clause
# Debian packages with CPack, from what `cmake --install` puts (cmake/library.cmake):
#   wirespeed      libwirespeed.so.MAJOR, wirespeed-testpmd, the guides and driver READMEs
#   wirespeed-dev  headers, libwirespeed.so and .a, wirespeed.pc, the CMake package
# scripts/package builds them (the x86-64-v2 baseline, prefix /usr) and checks that they
# install and remove cleanly.
set(CPACK_PACKAGE_NAME wirespeed)
set(CPACK_PACKAGE_VENDOR wirespeed)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "kernel-bypass packet I/O framework (C++23) and wirespeed-testpmd")
set(CPACK_PACKAGE_CONTACT "wirespeed maintainers <wirespeed@localhost>")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ONE_PER_GROUP)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # Depends: from the binaries' libraries (dpkg-shlibdeps)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME wirespeed)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)  # a shlibs file for packages that link libwirespeed.so.0
set(CPACK_DEBIAN_DEV_PACKAGE_NAME wirespeed-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# The headers include fmt's; static linking needs the drivers' libraries.
set(ws_dev_depends "wirespeed (= ${PROJECT_VERSION}), libfmt-dev, libpcap-dev")
if(TARGET PkgConfig::LIBXDP)
  string(APPEND ws_dev_depends ", libxdp-dev, libbpf-dev")
endif()
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${ws_dev_depends}")
set(CPACK_DEBIAN_DEV_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_DEV_PACKAGE_RECOMMENDS "pkg-config, cmake, g++ (>= 4:12)")
set(CPACK_COMPONENTS_ALL lib bin doc dev)
include(CPack)
cpack_add_component_group(runtime DESCRIPTION "wirespeed library and wirespeed-testpmd")
cpack_add_component_group(dev DESCRIPTION "wirespeed development files")
cpack_add_component(lib GROUP runtime)
cpack_add_component(bin GROUP runtime)
cpack_add_component(doc GROUP runtime)
cpack_add_component(dev GROUP dev)
