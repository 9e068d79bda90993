# Passed as -DCMAKE_PROJECT_INCLUDE when tools/setup_venv.sh builds an upstream interface package
# (composition_interfaces of requirements-ros2-tools.txt): wheel_include_dirs.cmake run at the end of its top
# directory, after its find_package calls, so the upstream CMakeLists.txt needs no edit.
find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module NumPy)
cmake_language(EVAL CODE
  "cmake_language(DEFER DIRECTORY [[${CMAKE_SOURCE_DIR}]] CALL include [[${CMAKE_CURRENT_LIST_DIR}/wheel_include_dirs.cmake]])")
